"""Arguments are checked against the tool's original schema, and problems named field by field."""

import itertools
import json

import pytest

from app.mcp.arguments import FieldProblem, _describe, _plain, compile_validator, problems

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 1},
        "units": {"enum": ["metric", "imperial"]},
        "where": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]},
    },
    "required": ["city"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"city": "Oslo"}, []),
        ({}, [FieldProblem("city", "missing: this field is required")]),
        ({"city": 3}, [FieldProblem("city", "expected string, got 3")]),
        ({"city": "Oslo", "days": "2"}, [FieldProblem("days", "expected integer, got '2'")]),
        ({"city": "Oslo", "units": "kelvin"},
         [FieldProblem("units", "must be one of 'metric', 'imperial', got 'kelvin'")]),
        ({"city": "Oslo", "where": {}}, [FieldProblem("where.lat", "missing: this field is required")]),
        ({"city": "Oslo", "colour": "red"},
         [FieldProblem("(arguments)", "unknown fields are not allowed ('colour' was unexpected)")]),
        ({"city": "Oslo", "days": 0}, [FieldProblem("days", "0 is less than the minimum of 1")]),
    ],
)
def test_problems_name_the_field_and_what_was_expected(arguments: dict, expected: list) -> None:
    assert problems(compile_validator(SCHEMA), arguments) == expected


def test_a_broken_or_missing_schema_checks_nothing() -> None:
    assert compile_validator({"type": "object", "properties": {"x": {"type": 12}}}) is None
    assert compile_validator(None) is None
    assert problems(None, {"anything": 1}) == []


def test_the_schemas_own_dialect_is_used() -> None:
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
              "properties": {"n": {"type": "integer"}}, "dependencies": {"n": ["m"]}}
    assert problems(compile_validator(draft7), {"n": 1}) == [FieldProblem("(arguments)", "'m' is a dependency of 'n'")]


def test_a_schema_is_checked_once_however_many_tools_and_catalogue_rebuilds_have_it() -> None:
    # 50 servers of 20 tools took 190 s to start, checking every schema again at each server's arrival
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    first = compile_validator(schema)
    assert first is not None and compile_validator(json.loads(json.dumps(schema))) is first
    schema["required"] = ["country"]  # a later change to the caller's dict is a different schema
    assert compile_validator(schema) is not first
    assert [problem.field for problem in problems(first, {})] == ["city"]  # the first keeps the schema it was given


PLAIN = {"type": "object", "properties": {"city": {"type": "string", "description": "d"}, "days": {"type": "integer"},
                                          "metric": {"type": "boolean"}, "anything": {}},
         "required": ["city"], "additionalProperties": False}
VALUES = ["Oslo", "", 0, 2, 1.0, 2.5, True, None, [], {}]


@pytest.mark.parametrize("dialect", [None, "http://json-schema.org/draft-07/schema#", "http://json-schema.org/draft-04/schema#"])
def test_plain_schemas_are_checked_without_jsonschema_yet_accept_only_what_it_accepts(dialect: str | None) -> None:
    schema = PLAIN if dialect is None else PLAIN | {"$schema": dialect}
    validator = compile_validator(schema)
    assert validator is not None
    accepts = _plain(validator.schema)
    assert accepts is not None
    for city, days, metric in itertools.product(VALUES, repeat=3):
        for arguments in ({"city": city, "days": days, "metric": metric}, {"days": days}, {"city": city, "x": metric}):
            if accepts(arguments):
                assert not list(validator.iter_errors(arguments)), arguments
            assert problems(validator, arguments) == sorted(
                {p for e in validator.iter_errors(arguments) for p in _describe(e)}, key=lambda p: (p.field, p.problem))


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"enum": [1]}}},
    {"type": "object", "properties": {"a": {"type": ["string", "null"]}}},
    {"type": "object", "properties": {"a": {"type": "string", "minLength": 2}}},
    {"type": "object", "properties": {"a": {"type": "object", "properties": {}}}},
    {"type": "object", "additionalProperties": {"type": "string"}},
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}, "$defs": {"x": {}}},
    {"type": "object", "anyOf": [{}]},
    {"properties": {}},
])
def test_other_schemas_are_left_to_jsonschema(schema: dict) -> None:
    assert _plain(schema) is None
