"""Which tool calls ask first: every row of mcp.json's `confirm` x TOOLBRIDGE_CONFIRM x a tool's annotations, and
the catalogue's routes filled from it (the gateway's own resource reader never asks)."""

from typing import Any, get_args

import pytest
from mcp.types import Tool, ToolAnnotations

from app.mcp.approval import ServerConfirm, asks_first
from app.mcp.convert import ConversionOptions, build_catalogue
from app.mcp.resources import READ_RESOURCE
from app.settings.vocabularies import ConfirmPolicy

POLICIES: tuple[ConfirmPolicy, ...] = ("off", "destructive", "writes", "all")
ANNOTATIONS: dict[str, ToolAnnotations | None] = {
    "none": None,
    "empty": ToolAnnotations(),
    "read_only": ToolAnnotations(readOnlyHint=True),
    "destructive": ToolAnnotations(destructiveHint=True),
    "not_destructive": ToolAnnotations(destructiveHint=False),
    "read_only_and_destructive": ToolAnnotations(readOnlyHint=True, destructiveHint=True),  # contradicts itself
    "not_read_only": ToolAnnotations(readOnlyHint=False),  # MCP: "may destroy" by default; not said, so no
}
# TOOLBRIDGE_CONFIRM alone (no `confirm` in mcp.json, or a list that does not name the tool), by annotations:
#                                off    destructive writes all
BY_DEFAULT: dict[str, tuple[bool, bool, bool, bool]] = {
    "none":                      (False, False, True, True),
    "empty":                     (False, False, True, True),
    "read_only":                 (False, False, False, True),
    "destructive":               (False, True, True, True),
    "not_destructive":           (False, False, True, True),
    "read_only_and_destructive": (False, False, False, True),
    "not_read_only":             (False, False, True, True),
}
LISTED = ["write_*", "delete_note", "archive_[0-9]"]


def test_the_table_covers_every_policy() -> None:
    assert get_args(ConfirmPolicy) == POLICIES
    assert BY_DEFAULT.keys() == ANNOTATIONS.keys()


def rows() -> list[Any]:
    table = []
    for label, annotations in ANNOTATIONS.items():
        for policy, by_default in zip(POLICIES, BY_DEFAULT[label], strict=True):
            server: ServerConfirm
            for server, tool, expected in [
                (None, "write_note", by_default),  # absent: the global default
                (True, "read_note", True),  # every tool of the server, read-only ones too
                (False, "delete_note", False),  # none, whatever the default and the annotations
                (LISTED, "write_note", True),  # a glob
                (LISTED, "delete_note", True),  # a name
                (LISTED, "archive_7", True),  # a glob's character class
                (LISTED, "archive_77", by_default),  # not matched: the default
                (LISTED, "Write_note", by_default),  # tool names are case-sensitive, and so are the globs
                (LISTED, "rewrite_note", by_default),  # a glob matches the whole name
                ([], "write_note", by_default),  # an empty list names nothing
            ]:
                table.append(pytest.param(tool, annotations, server, policy, expected,
                                          id=f"{label}-{policy}-{server}-{tool}"))
    return table


@pytest.mark.parametrize(("tool", "annotations", "server", "policy", "expected"), rows())
def test_which_calls_ask_first(
    tool: str, annotations: ToolAnnotations | None, server: ServerConfirm, policy: ConfirmPolicy, expected: bool
) -> None:
    assert asks_first(tool, annotations, server, policy) is expected


def notes_tools() -> list[Tool]:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    return [
        Tool(name="read_note", input_schema=schema, annotations=ToolAnnotations(readOnlyHint=True)),
        Tool(name="delete_note", input_schema=schema, annotations=ToolAnnotations(destructiveHint=True)),
        Tool(name="write_note", input_schema=schema),
    ]


def asking(policy: ConfirmPolicy, confirms: dict[str, ServerConfirm], readers: frozenset[str] = frozenset()
           ) -> dict[str, bool]:
    tools = {server: notes_tools() for server in ("a", "b")}
    tools["a"] = [*tools["a"], Tool(name=READ_RESOURCE, input_schema={"type": "object"},
                                    annotations=ToolAnnotations(idempotentHint=True))]
    catalogue = build_catalogue(tools, ConversionOptions(confirm=policy), readers, confirms)
    described = {entry["function"]["name"]: entry["asks_first"] for entry in catalogue.describe()}
    routes = {name: route.asks_first for name, route in catalogue.routes.items()}
    assert described == routes  # /tools says what the loop will do
    return routes


def test_the_catalogue_marks_each_route_by_its_servers_confirm_and_the_default() -> None:
    assert asking("destructive", {}) == {
        "a__read_note": False, "a__delete_note": True, "a__write_note": False, "a__read_resource": False,
        "b__read_note": False, "b__delete_note": True, "b__write_note": False,
    }
    assert asking("writes", {"a": False, "b": ["read_*"]}) == {
        "a__read_note": False, "a__delete_note": False, "a__write_note": False, "a__read_resource": False,
        "b__read_note": True, "b__delete_note": True, "b__write_note": True,
    }
    assert asking("off", {"a": True, "b": ["write_*"]}) == {
        "a__read_note": True, "a__delete_note": True, "a__write_note": True, "a__read_resource": True,
        "b__read_note": False, "b__delete_note": False, "b__write_note": True,
    }


def test_the_gateways_resource_reader_never_asks() -> None:
    # `a` has resources: its read_resource is the gateway's own, and only reads, whatever `confirm` says.
    routes = asking("all", {"a": True}, readers=frozenset({"a"}))
    assert routes["a__read_resource"] is False
    assert all(asks for name, asks in routes.items() if name != "a__read_resource")


def test_the_default_options_ask_only_before_what_the_server_says_destroys() -> None:
    catalogue = build_catalogue({"s": notes_tools()})
    assert {name: route.asks_first for name, route in catalogue.routes.items()} == {
        "s__read_note": False, "s__delete_note": True, "s__write_note": False}
