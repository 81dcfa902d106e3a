"""Arguments are checked against the tool's original schema, and problems named field by field."""

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
