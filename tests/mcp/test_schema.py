"""The schema profiles: what LM Studio's and llama.cpp's grammars get, rule by rule."""

import json

import pytest

from app.mcp.schema import anchor_pattern, grammar_safe, meets_strict_mode, object_root, to_profile


def obj(**properties: object) -> dict:
    return {"type": "object", "properties": properties}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # $schema and other annotations go
        ({"$schema": "https://json-schema.org/draft/2020-12/schema", **obj()}, obj()),
        # refs are inlined and $defs dropped
        ({**obj(p={"$ref": "#/$defs/P"}), "$defs": {"P": {"type": "string"}}}, obj(p={"type": "string"})),
        ({**obj(p={"$ref": "#/definitions/P", "description": "kept"}), "definitions": {"P": {"type": "integer"}}},
         obj(p={"type": "integer", "description": "kept"})),
        # nested refs
        ({**obj(a={"$ref": "#/$defs/A"}), "$defs": {"A": obj(b={"$ref": "#/$defs/B"}), "B": {"type": "boolean"}}},
         obj(a=obj(b={"type": "boolean"}))),
        # not, boolean subschemas, additionalProperties false
        (obj(x={"type": "string", "not": {"const": ""}}), obj(x={"type": "string"})),
        (obj(x=True), obj(x={})),
        (obj(x=False, y={"type": "string"}), obj(y={"type": "string"})),
        ({**obj(), "additionalProperties": False}, obj()),
        (obj(x={"type": "array", "items": True}), obj(x={"type": "array"})),
        # bounds too large for a grammar go; small ones stay
        (obj(x={"type": "string", "maxLength": 100000, "minLength": 1}), obj(x={"type": "string", "minLength": 1})),
        (obj(x={"type": "array", "maxItems": 5000}), obj(x={"type": "array"})),
        (obj(x={"type": "integer", "maximum": 9223372036854775807, "minimum": 0}),
         obj(x={"type": "integer", "minimum": 0})),
        # patterns anchored, or dropped when they cannot be made safe
        (obj(x={"type": "string", "pattern": "^[a-z]+$"}), obj(x={"type": "string", "pattern": "^[a-z]+$"})),
        (obj(x={"type": "string", "pattern": "[0-9]{3}"}), obj(x={"type": "string", "pattern": "^.*([0-9]{3}).*$"})),
        (obj(x={"type": "string", "pattern": "(?=.*\\d)\\w+"}), obj(x={"type": "string"})),
        # anyOf / oneOf / type lists with null become the plain type
        (obj(x={"anyOf": [{"type": "string"}, {"type": "null"}], "title": "X"}),
         obj(x={"type": "string", "title": "X"})),
        (obj(x={"oneOf": [{"type": "null"}, {"type": "integer", "description": "n"}], "description": "count"}),
         obj(x={"type": "integer", "description": "n count"})),
        (obj(x={"type": ["string", "null"]}), obj(x={"type": "string"})),
        (obj(x={"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}),
         obj(x={"anyOf": [{"type": "string"}, {"type": "integer"}]})),
        # defaults and enums into words
        (obj(nick={"type": "string", "default": None}), obj(nick={"type": "string"})),
        (obj(mode={"type": "string", "default": "auto"}),
         obj(mode={"type": "string", "description": "(default: 'auto')"})),
        (obj(mode={"type": "string", "enum": ["a", "b"], "description": "How."}),
         obj(mode={"type": "string", "enum": ["a", "b"], "description": "How. One of: 'a', 'b'."})),
        (obj(city={"type": "string", "enum": ["Oslo"], "description": "Choose city"}),
         obj(city={"type": "string", "enum": ["Oslo"], "description": "Choose city. One of: 'Oslo'."})),
        (obj(n={"type": "integer", "enum": [1, 2], "default": 1}),
         obj(n={"type": "integer", "enum": [1, 2], "description": "One of: 1, 2. (default: 1)"})),
        # required names that no longer exist are dropped
        ({**obj(x=False, y={"type": "string"}), "required": ["x", "y"]},
         {**obj(y={"type": "string"}), "required": ["y"]}),
    ],
)
def test_grammar_safe_rules(source: dict, expected: dict) -> None:
    assert grammar_safe(object_root(source)) == expected


def test_cyclic_refs_end_in_an_open_object_named_in_words() -> None:
    tree = {"$ref": "#/$defs/Node"}
    node = obj(value={"type": "string"}, children={"type": "array", "items": tree})
    schema = {**obj(root=tree), "$defs": {"Node": node}}
    safe = grammar_safe(schema)
    children = safe["properties"]["root"]["properties"]["children"]
    assert children["items"] == {"type": "object", "description": "An object of the same shape as 'Node'."}
    assert "$ref" not in json.dumps(safe)


def test_a_self_referencing_root_terminates() -> None:
    schema = {**obj(next={"$ref": "#"}), "$defs": {}}
    safe = grammar_safe(schema)
    assert safe["properties"]["next"]["type"] == "object"


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("^abc$", "^abc$"),
        ("^abc", "^(abc).*$"),
        ("abc$", "^.*(abc)$"),
        ("a|b", "^.*(a|b).*$"),
        ("\\$5", "^.*([$]5).*$"),
        ("(?i)abc", None),
        ("(\\w)\\1", None),
        ("\\bword\\b", None),
        ("a+?", None),
        ("[unclosed", None),
        (42, None),
        # llama.cpp's grammars know no shorthand classes and few escapes (Brave Search's dates failed every request)
        ("^\\d{4}-\\d{2}-\\d{2}$", "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"),
        ("^[\\w.]+$", "^[A-Za-z0-9_.]+$"),
        ("^a\\sb$", "^a[ \\t\\n\\r]b$"),
        ("^https?:\\/\\/", "^(https?://).*$"),
        ("^v\\.\\d+\\$$", "^v[.][0-9]+[$]$"),
        ("^a\\-b\\(c\\)$", "^a-b\\(c\\)$"),
        ("^\\D+$", None),
        ("^[a-z\\-]+$", None),
    ],
)
def test_anchor_pattern(pattern: object, expected: str | None) -> None:
    assert anchor_pattern(pattern) == expected


@pytest.mark.parametrize(
    ("schema", "strict"),
    [
        ({**obj(q={"type": "string"}), "required": ["q"], "additionalProperties": False}, True),
        ({**obj(q={"type": "string"}), "required": [], "additionalProperties": False}, False),
        ({**obj(q={"type": "string"}), "required": ["q"]}, False),
        ({**obj(q={**obj(), "additionalProperties": False, "required": []}), "required": ["q"],
          "additionalProperties": False}, True),
        ({**obj(q={**obj(n={"type": "integer"})}), "required": ["q"], "additionalProperties": False}, False),
        ({**obj(q={"allOf": [{"type": "string"}]}), "required": ["q"], "additionalProperties": False}, False),
        ({"anyOf": [obj()], **obj()}, False),
    ],
)
def test_strict_mode_only_where_the_schema_meets_it(schema: dict, strict: bool) -> None:
    assert meets_strict_mode(schema) is strict
    assert to_profile(schema, "openai") == (object_root(schema), strict)


def test_passthrough_changes_nothing_but_the_root() -> None:
    schema = {"$schema": "x", **obj(p={"$ref": "#/$defs/P"}), "$defs": {"P": {"type": "string"}}}
    assert to_profile(schema, "passthrough") == (schema, False)
