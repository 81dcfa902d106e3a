"""What a reload of mcp.json changes (app/mcp/reload.py), by table."""

import pytest

from app.mcp.config import HttpServerConfig, StdioServerConfig
from app.mcp.reload import ConfigDiff, diff_configs

A = StdioServerConfig(command="a")
A_CHANGED = StdioServerConfig(command="a", args=["--verbose"])
A_ASKING = StdioServerConfig(command="a", confirm=["write_*"])  # its tools' asks_first come with a restart
B = HttpServerConfig(url="http://127.0.0.1:9/mcp")


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ({}, {"a": A}, ConfigDiff(stopping=[], starting=["a"], unchanged=0)),
        ({"a": A}, {}, ConfigDiff(stopping=["a"], starting=[], unchanged=0)),
        ({"a": A, "b": B}, {"a": A, "b": B}, ConfigDiff(stopping=[], starting=[], unchanged=2)),
        ({"a": A, "b": B}, {"a": A_CHANGED, "b": B}, ConfigDiff(stopping=["a"], starting=["a"], unchanged=1)),
        ({"a": A}, {"a": A_ASKING}, ConfigDiff(stopping=["a"], starting=["a"], unchanged=0)),
        ({"a": A}, {"b": B}, ConfigDiff(stopping=["a"], starting=["b"], unchanged=0)),
        ({"a": A}, {"c": A}, ConfigDiff(stopping=["a"], starting=["c"], unchanged=0)),  # a rename is a new server
    ],
    ids=["added", "removed", "unchanged", "changed", "confirm-changed", "replaced", "renamed"],
)
def test_a_reload_stops_what_went_or_changed_and_starts_what_came_or_changed(
    old: dict, new: dict, expected: ConfigDiff
) -> None:
    assert diff_configs(old, new) == expected
