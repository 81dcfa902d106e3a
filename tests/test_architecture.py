"""The import rules of DESIGN.md (who may import the mcp SDK, httpx, the web framework) hold."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
SDK_AND_CLIENTS = ("mcp", "httpx", "httpx2", "aiohttp")


def test_import_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    "module", ["app.settings", "app.openai.result_format", "app.ops.recent_calls", "app.ops.metrics"]
)
def test_settings_and_the_result_format_load_no_sdk_and_no_http_client(module: str) -> None:
    """Leaves at run time too, where import-linter sees only the imports written: whatever reads a setting
    or writes a tool result for the model loads neither the MCP SDK nor an HTTP client."""
    check = f"import sys, {module}; print(sorted(m for m in {SDK_AND_CLIENTS!r} if m in sys.modules))"
    result = subprocess.run(
        [sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
