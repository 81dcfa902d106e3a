"""The import rules of DESIGN.md (who may import the mcp SDK, httpx, the web framework) hold."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_import_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
