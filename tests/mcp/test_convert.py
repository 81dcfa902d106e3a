"""MCP tools -> OpenAI tools: names, prefix modes, definitions, and the catalogue that maps back."""

import hashlib
import re

import pytest
from mcp.types import Tool, ToolAnnotations, ToolExecution

from app.mcp.convert import (
    MAX_DESCRIPTION_CHARS,
    ConversionOptions,
    ToolRoute,
    build_catalogue,
    exposed_name,
    resolve_profile,
    shortened_description,
    to_openai_tool,
)

OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def tool(name: str, schema: dict | None = None, **extra: object) -> Tool:
    return Tool(name=name, input_schema=schema if schema is not None else {"type": "object"}, **extra)


def names(catalogue) -> list[str]:
    return [t["function"]["name"] for t in catalogue.openai_tools]


@pytest.mark.parametrize(
    ("server", "name", "expected"),
    [
        ("time", "get_current_time", "time__get_current_time"),
        ("fs", "read-file", "fs__read-file"),
        ("github", "repos.list", "github__repos_list"),
        ("my server", "tool/x", "my_server__tool_x"),
        ("café", "größe", "caf___gr__e"),
        ("weather", "天气", "weather__tool_" + hashlib.sha256("weather\x00天气".encode()).hexdigest()[:8]),
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


HARD_NAMES = ["get.item", "get_item", "y" * 100, "y" * 100 + ".z", "天气.查询", "天气_查询", "a" * 128]


@pytest.mark.parametrize("prefix", ["always", "on-conflict"])
def test_every_hard_name_is_valid_distinct_stable_and_maps_back(prefix: str) -> None:
    tools = {"s1": [tool(n) for n in HARD_NAMES], "s2": [tool("get.item"), tool("only_here")]}
    catalogue = build_catalogue(tools, ConversionOptions(prefix=prefix))  # type: ignore[arg-type]
    exposed = names(catalogue)
    assert len(exposed) == len(set(exposed)) == len(HARD_NAMES) + 2
    assert all(OPENAI_NAME.match(n) for n in exposed)
    assert sorted((r.server, r.tool) for r in catalogue.routes.values()) == sorted(
        [("s1", n) for n in HARD_NAMES] + [("s2", "get.item"), ("s2", "only_here")]
    )
    assert names(build_catalogue(tools, ConversionOptions(prefix=prefix))) == exposed  # type: ignore[arg-type]


def test_on_conflict_drops_the_prefix_only_where_no_two_servers_share_a_name() -> None:
    catalogue = build_catalogue(
        {"time": [tool("get_current_time"), tool("search")], "web": [tool("search"), tool("fetch")]},
        ConversionOptions(prefix="on-conflict"),
    )
    assert names(catalogue) == ["get_current_time", "time__search", "web__search", "fetch"]
    assert catalogue.route("fetch") == ToolRoute("web", "fetch")
    assert catalogue.route("time__search") == ToolRoute("time", "search")


def test_a_catalogue_clears_the_names_a_client_uses() -> None:
    catalogue = build_catalogue({"time": [tool("now")], "web": [tool("search")]},
                                ConversionOptions(prefix="on-conflict"))
    assert catalogue.clear_of(set()) is catalogue
    cleared = catalogue.clear_of({"search", "web__search_other"})
    assert names(cleared) == ["now", "web__search"]
    assert cleared.route("web__search") == ToolRoute("web", "search") and cleared.route("search") is None
    # a client that already uses the prefixed name too gets a hashed one
    hashed = catalogue.clear_of({"search", "web__search"})
    assert names(hashed)[1].startswith("web__search_") and hashed.route(names(hashed)[1]) == ToolRoute("web", "search")


def test_tools_that_require_tasks_are_left_out() -> None:
    required = tool("long_job", execution=ToolExecution(task_support="required"))
    optional = tool("quick", execution=ToolExecution(task_support="optional"))
    assert names(build_catalogue({"s": [required, optional]})) == ["s__quick"]


def test_similar_names_are_offered_for_a_wrong_one() -> None:
    catalogue = build_catalogue({"fs": [tool("read_file"), tool("write_file"), tool("list_directory")]})
    assert catalogue.similar("fs__read_files")[0] == "fs__read_file"
    assert catalogue.similar("completely_else") == []


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "object"}, {"type": "object", "properties": {}}),
        ({}, {"type": "object", "properties": {}}),
        ({"properties": None}, {"type": "object", "properties": {}}),
    ],
)
def test_parameters_are_always_an_object_schema_with_properties(schema: dict, expected: dict) -> None:
    source = tool("t", schema)
    for profile in ("lmstudio", "openai", "passthrough"):
        converted = to_openai_tool("s__t", source, profile)  # type: ignore[arg-type]
        assert converted["function"]["parameters"] == expected
    to_openai_tool("s__t", source)["function"]["parameters"]["properties"]["added"] = {}
    assert "added" not in (source.input_schema.get("properties") or {})


def test_the_original_schema_is_kept_for_checking_arguments() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "default": 3}}, "required": ["n"]}
    catalogue = build_catalogue({"s": [tool("t", schema)]})
    sent = catalogue.openai_tools[0]["function"]["parameters"]
    assert "default" not in sent["properties"]["n"]
    validator = catalogue.route("s__t").validator  # type: ignore[union-attr]
    assert validator is not None and validator.schema == schema


def test_strict_is_set_only_for_the_openai_profile_and_only_when_it_can_hold() -> None:
    closed = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"],
              "additionalProperties": False}
    open_ = {"type": "object", "properties": {"q": {"type": "string"}}}
    assert to_openai_tool("n", tool("t", closed), "openai")["function"]["strict"] is True
    assert "strict" not in to_openai_tool("n", tool("t", open_), "openai")["function"]
    assert "strict" not in to_openai_tool("n", tool("t", closed), "lmstudio")["function"]


@pytest.mark.parametrize(
    ("extra", "description"),
    [
        ({"description": "Does it."}, "Does it."),
        ({"title": "Title only"}, "Title only"),
        ({"description": "Reads.", "annotations": ToolAnnotations(readOnlyHint=True)}, "Reads. (Read-only.)"),
        ({"description": "Drops.", "annotations": ToolAnnotations(destructiveHint=True)},
         "Drops. (Changes or deletes data.)"),
    ],
)
def test_descriptions_stay_as_written_with_hints_noted(extra: dict, description: str) -> None:
    assert to_openai_tool("n", tool("t", **extra))["function"]["description"] == description


@pytest.mark.parametrize(
    ("setting", "url", "profile"),
    [
        ("auto", "http://localhost:1234/v1", "lmstudio"),  # LM Studio
        ("auto", "http://127.0.0.1:8080/v1", "lmstudio"),  # llama.cpp server
        ("auto", "http://ollama:11434/v1", "lmstudio"),
        ("auto", "https://api.openai.com/v1", "openai"),
        ("auto", "https://mine.openai.azure.com/openai/v1", "openai"),
        ("auto", "https://api.openai.com.example.net/v1", "lmstudio"),
        ("llamacpp", "https://api.openai.com/v1", "llamacpp"),  # a named profile is taken as named
        ("passthrough", "http://localhost:1234/v1", "passthrough"),
    ],
)
def test_auto_profile_follows_the_upstream(setting: str, url: str, profile: str) -> None:
    assert resolve_profile(setting, url) == profile


@pytest.mark.parametrize(("text", "limit", "expected"), [
    ("Short.", 1000, "Short."),
    ("One. Two. Three is long enough to go over.", 12, "One. Two."),
    ("Usage:\n\nFirst paragraph.\n\nSecond paragraph is the one that goes over.", 30, "Usage: First paragraph."),
    ("a" * 20 + " " + "b" * 20, 30, "a" * 20 + "…"),  # no sentence fits: words, then an ellipsis
])
def test_long_descriptions_keep_their_first_sentences(text: str, limit: int, expected: str) -> None:
    assert shortened_description(text, limit) == expected


def test_a_shortened_description_keeps_its_original_for_people() -> None:
    long = "Reads a page. " + "It has many notes on usage. " * 100
    catalogue = build_catalogue({"s": [tool("read", description=long, annotations=ToolAnnotations(readOnlyHint=True)),
                                       tool("short", description="Short.")]})
    read, short = catalogue.describe()
    assert len(read["function"]["description"]) <= MAX_DESCRIPTION_CHARS + len(" (Read-only.)")
    assert read["function"]["description"].endswith("usage. (Read-only.)")
    assert read["original_description"] == long
    assert "original_description" not in short
