"""The pure MCP -> OpenAI conversions: names, definitions, results."""

import base64
import re

import pytest
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    Tool,
)

from app.mcp.convert import (
    ToolOutcome,
    ToolRoute,
    build_catalogue,
    exposed_name,
    outcome_from_result,
    to_openai_tool,
)

OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def tool(name: str, schema: dict | None = None, **extra: object) -> Tool:
    return Tool(name=name, input_schema=schema if schema is not None else {"type": "object"}, **extra)


@pytest.mark.parametrize(
    ("server", "name", "expected"),
    [
        ("time", "get_current_time", "time__get_current_time"),
        ("fs", "read-file", "fs__read-file"),
        ("github", "repos.list", "github__repos_list"),
        ("my server", "tool/x", "my_server__tool_x"),
        ("café", "größe", "caf___gr__e"),
    ],
)
def test_names_are_prefixed_and_made_safe(server: str, name: str, expected: str) -> None:
    assert exposed_name(server, name) == expected


def test_long_names_are_cut_with_a_stable_distinct_hash() -> None:
    first = exposed_name("server", "x" * 100 + "a")
    second = exposed_name("server", "x" * 100 + "b")
    assert len(first) == len(second) == 64
    assert OPENAI_NAME.match(first) and OPENAI_NAME.match(second)
    assert first != second
    assert first == exposed_name("server", "x" * 100 + "a")


def test_catalogue_maps_every_name_back_and_separates_collisions() -> None:
    catalogue = build_catalogue({
        "a": [tool("get.item"), tool("get_item"), tool("y" * 128)],
        "b": [tool("get.item")],
    })
    names = [t["function"]["name"] for t in catalogue.openai_tools]
    assert len(set(names)) == 4
    assert all(OPENAI_NAME.match(n) for n in names)
    assert sorted((r.server, r.tool) for r in catalogue.routes.values()) == sorted(
        [("a", "get.item"), ("a", "get_item"), ("a", "y" * 128), ("b", "get.item")]
    )
    assert catalogue.route("b__get_item") == ToolRoute("b", "get.item")


def test_tools_that_require_tasks_are_left_out() -> None:
    from mcp.types import ToolExecution

    required = tool("long_job", execution=ToolExecution(task_support="required"))
    optional = tool("quick", execution=ToolExecution(task_support="optional"))
    catalogue = build_catalogue({"s": [required, optional]})
    assert [t["function"]["name"] for t in catalogue.openai_tools] == ["s__quick"]


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "object"}, {"type": "object", "properties": {}}),
        ({}, {"type": "object", "properties": {}}),
        ({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
         {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
        ({"properties": None}, {"type": "object", "properties": {}}),
    ],
)
def test_parameters_are_always_an_object_schema_with_properties(schema: dict, expected: dict) -> None:
    source = tool("t", schema)
    converted = to_openai_tool("s__t", source)
    assert converted == {"type": "function", "function": {"name": "s__t", "description": "", "parameters": expected}}
    converted["function"]["parameters"]["properties"]["added"] = {}
    assert "added" not in (source.input_schema.get("properties") or {})


def test_description_falls_back_to_title() -> None:
    assert to_openai_tool("n", tool("t", description="Does it."))["function"]["description"] == "Does it."
    assert to_openai_tool("n", tool("t", title="Title only"))["function"]["description"] == "Title only"


PNG = base64.b64encode(b"\x89PNG" + b"\x00" * 66).decode()


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (CallToolResult(content=[TextContent(type="text", text="a"), TextContent(type="text", text="b")]),
         ToolOutcome("a\nb", False)),
        (CallToolResult(content=[TextContent(type="text", text="bad input")], is_error=True),
         ToolOutcome("Error: bad input", True)),
        (CallToolResult(content=[], is_error=True),
         ToolOutcome("Error: the tool reported an error without a message", True)),
        (CallToolResult(content=[]), ToolOutcome("(the tool returned no content)", False)),
        (CallToolResult(content=[], structured_content={"t": 21.5}), ToolOutcome('{"t": 21.5}', False)),
        (CallToolResult(content=[TextContent(type="text", text='{"t": 21.5}')], structured_content={"t": 21.5}),
         ToolOutcome('{"t": 21.5}', False)),
        (CallToolResult(content=[ImageContent(type="image", data=PNG, mime_type="image/png")]),
         ToolOutcome("[image: image/png, 70 bytes]", False)),
        (CallToolResult(content=[AudioContent(type="audio", data=PNG, mime_type="audio/wav")]),
         ToolOutcome("[audio: audio/wav, 70 bytes]", False)),
        (CallToolResult(content=[ResourceLink(type="resource_link", uri="file:///a.txt", name="a.txt")]),
         ToolOutcome("[resource link: a.txt <file:///a.txt>]", False)),
        (CallToolResult(content=[EmbeddedResource(type="resource", resource=TextResourceContents(
            uri="file:///n.md", text="# Notes"))]), ToolOutcome("# Notes", False)),
        (CallToolResult(content=[EmbeddedResource(type="resource", resource=BlobResourceContents(
            uri="file:///b.bin", blob=PNG, mime_type="application/zip"))]),
         ToolOutcome("[resource file:///b.bin: application/zip, 70 bytes]", False)),
    ],
)
def test_results_become_tool_message_text(result: CallToolResult, expected: ToolOutcome) -> None:
    assert outcome_from_result(result) == expected
