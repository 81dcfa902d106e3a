"""The checks settings' values pass (app/settings/checks.py): each bad value refused with a message that
names the setting, each good one kept (normalised where the check says so)."""

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from app.settings import Settings


def settings(**values: Any) -> Settings:
    return Settings.load(_env_file=None, **values)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("public_url", "ftp://example.org", "http(s) address"),
    ("public_url", "https://example.org/?q=1", "http(s) address"),
    ("public_url", "example.org", "http(s) address"),
    ("state_url", "postgres://db/toolbridge", "state_url"),
    ("toolsets", {"bad name!": ["time"]}, "toolset name 'bad name!'"),
    ("toolsets", {"empty": []}, "toolset 'empty' lists no server or tool"),
    ("log_level", "LOUD", "log_level"),
    ("confirm_timeout", 0, "confirm_timeout"),
])
def test_a_bad_value_is_refused_naming_the_setting(field: str, value: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")) as refused:
        settings(**{field: value})
    assert field in str(refused.value)


def test_good_values_are_kept_and_normalised() -> None:
    read = settings(public_url="https://chat.example.org/gateway/", state_url="memory://", log_level="DEBUG",
                    toolsets={"web.tools-1": ["fetch"]}, mcp_config=Path("/etc/toolbridge/mcp.json"))
    assert read.server.public_url == "https://chat.example.org/gateway"
    assert (read.state.url, read.ops.log_level, read.mcp.config) == ("memory://", "debug", "/etc/toolbridge/mcp.json")
    assert read.tools.toolsets == {"web.tools-1": ["fetch"]}
    assert settings(public_url="").server.public_url == ""
