"""Arguments are checked against the tool's original schema, and problems named field by field."""

import json

import pytest

from app.mcp.arguments import FieldProblem, compile_validator, problems

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
