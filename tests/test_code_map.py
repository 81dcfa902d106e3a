"""The code map (docs/architecture.md) names every module of the app, and only modules that exist."""

import re
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_the_code_map_names_every_module_once_and_nothing_else() -> None:
    readme = (ROOT / "docs" / "architecture.md").read_text()
    section = readme.split("\n## Code map\n", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"`(app/[\w/]+\.py)`", section)
    modules = {
        str(path.relative_to(ROOT)) for path in (ROOT / "app").rglob("*.py") if path.read_text().strip()
    }
    assert sorted(set(named)) == sorted(modules), "the code map and app/ differ"
    assert len(named) == len(set(named)), "a module is named twice"
