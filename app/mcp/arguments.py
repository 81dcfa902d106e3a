"""Checks a model's tool arguments against the tool's original inputSchema before any call is made."""

import copy
import json
from dataclasses import dataclass
from typing import cast

from jsonschema import exceptions as schema_exceptions
from jsonschema import validators
from jsonschema.protocols import Validator

from app.openai.wire import JSONObject, JSONValue


@dataclass(frozen=True)
class FieldProblem:
    field: str
    problem: str

    def as_dict(self) -> JSONObject:
        return {"field": self.field, "problem": self.problem}


VALIDATORS_KEPT = 4096  # distinct schemas: every tool of 50 servers of 20 tools each, and their next versions


def compile_validator(schema: JSONObject | None) -> Validator | None:
    """A validator for the schema's own dialect (2020-12 by default), or None when the schema is invalid.

    Checking a schema is slow (7-40 ms a tool), and the catalogue is rebuilt with every tool of every server each
    time one server's list changes: 50 servers of 20 tools took 190 s to start. So each distinct schema is checked
    once (a validator only reads its schema, so tools may share one)."""
    if not schema:
        return None
    key = json.dumps(schema, sort_keys=True)
    if key not in _CHECKED:
        if len(_CHECKED) >= VALIDATORS_KEPT:
            _CHECKED.clear()
        _CHECKED[key] = _checked(copy.deepcopy(schema))  # a copy: the caller's dict may change later
    return _CHECKED[key]


_CHECKED: dict[str, Validator | None] = {}


def _checked(schema: JSONObject) -> Validator | None:
    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except schema_exceptions.SchemaError:
        return None  # the server's schema is broken; the server will judge the arguments itself
    return cls(schema)


def problems(validator: Validator | None, arguments: JSONObject) -> list[FieldProblem]:
    """What is missing or wrong, one entry per field, in a form a model can fix."""
    if validator is None:
        return []
    found = [problem for error in validator.iter_errors(arguments) for problem in _describe(error)]
    return sorted(set(found), key=lambda p: (p.field, p.problem))


def _describe(error: schema_exceptions.ValidationError) -> list[FieldProblem]:
    path = ".".join(str(part) for part in error.absolute_path)
    if error.validator == "required":  # one error per missing field; each names them all, the set keeps one
        # The instance `required` failed on is an object: the keyword judges nothing else (the stubs allow Unset).
        missing = [name for name in _value(error) if name not in cast(JSONObject, error.instance)]
        return [FieldProblem(f"{path}.{name}" if path else str(name), "missing: this field is required")
                for name in missing]
    return [_describe_one(error, path)]


def _describe_one(error: schema_exceptions.ValidationError, path: str) -> FieldProblem:
    if error.validator == "type":
        return FieldProblem(path or "(arguments)", f"expected {error.validator_value}, got {_show(error.instance)}")
    if error.validator == "enum":
        options = ", ".join(repr(v) for v in _value(error))
        return FieldProblem(path or "(arguments)", f"must be one of {options}, got {_show(error.instance)}")
    if error.validator == "additionalProperties":
        return FieldProblem(path or "(arguments)", error.message.replace("Additional properties", "unknown fields"))
    return FieldProblem(path or "(arguments)", error.message)


def _value(error: schema_exceptions.ValidationError) -> list[JSONValue]:
    """The keyword's value (required: the names, enum: the options), a list in a schema `check_schema` passed. The
    stubs allow jsonschema's Unset too, which an error from iter_errors never carries; a cast, not a check, so
    nothing changes at run time."""
    return cast(list[JSONValue], error.validator_value)


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
