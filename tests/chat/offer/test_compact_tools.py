"""A client's tools made compact (app/chat/compact_tools.py): a table of what is kept and what goes."""

from typing import Any

import pytest

from app.chat.offer.context_budget import wire_chars
from app.chat.offer.tool_budget import compact_tool, first_sentence, without_annotations
from bench.eval.tasks import client_tools


def function(description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": "t", "description": description, "parameters": parameters}}


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("Write a note. Use markdown; keep it short.", "Write a note."),
        ("  Is it raining?\nCall with a city.", "Is it raining?"),
        ("Version 1.5 of the API", "Version 1.5 of the API"),  # a dot inside a word ends no sentence
        ("no end at all", "no end at all"),
        ("x" * 500, "x" * 197 + "..."),
        ("", ""),
    ],
)
def test_a_description_keeps_its_first_sentence(text: str, kept: str) -> None:
    assert first_sentence(text) == kept


def test_a_schema_loses_its_words_for_people_and_keeps_what_a_call_depends_on() -> None:
    schema = {
        "type": "object", "title": "Args", "description": "All of it.",
        "properties": {
            "description": {"type": "string", "description": "The event's description."},  # a property so named
            "when": {"anyOf": [{"type": "string", "description": "ISO date"}, {"type": "null"}], "default": None},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"], "examples": ["a"]}},
            "nested": {"$ref": "#/$defs/N"},
        },
        "$defs": {"N": {"type": "object", "properties": {"x": {"type": "integer", "description": "X."}}}},
        "required": ["description"],
    }
    assert without_annotations(schema) == {
        "type": "object",
        "properties": {
            "description": {"type": "string"},
            "when": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
            "nested": {"$ref": "#/$defs/N"},
        },
        "$defs": {"N": {"type": "object", "properties": {"x": {"type": "integer"}}}},
        "required": ["description"],
    }


def test_a_tool_keeps_its_name_and_type_and_anything_it_did_not_know() -> None:
    tool = {**function("Adds. Carefully.", {"type": "object", "properties": {}}), "x-extra": 1}
    assert compact_tool(tool) == {**function("Adds.", {"type": "object", "properties": {}}), "x-extra": 1}
    assert compact_tool({"type": "function"}) == {"type": "function"}


def test_open_webuis_tools_take_half_the_room_compact() -> None:
    tools = client_tools("open_webui")
    compact = [compact_tool(tool) for tool in tools]
    assert [t["function"]["name"] for t in compact] == [t["function"]["name"] for t in tools]
    assert wire_chars(compact) < wire_chars(tools) / 2
