"""Checks a model's tool arguments against the tool's original inputSchema before any call is made."""

import copy
import json
from collections.abc import Callable
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
    if (accepts := _plain_check(validator)) is not None and accepts(arguments):
        return []
    found = [problem for error in validator.iter_errors(arguments) for problem in _describe(error)]
    return sorted(set(found), key=lambda p: (p.field, p.problem))


# The keywords jsonschema reads and asserts nothing with (`format` without a format checker, as compile_validator
# makes them): a schema of these, `type`, `properties`, `required` and `additionalProperties` may be checked plainly.
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "format", "deprecated", "readOnly",
                          "writeOnly", "$schema", "$id", "$comment"})
# A value of each JSON type as json.loads makes it. An integer given as 1.0 is left to jsonschema (drafts differ).
_OF_TYPE: dict[str, Callable[[object], bool]] = {
    "string": lambda value: isinstance(value, str),
    "integer": lambda value: isinstance(value, int) and not isinstance(value, bool),
    "number": lambda value: isinstance(value, int | float) and not isinstance(value, bool),
    "boolean": lambda value: isinstance(value, bool),
    "null": lambda value: value is None,
    "array": lambda value: isinstance(value, list),
    "object": lambda value: isinstance(value, dict),
}
Accepts = Callable[[JSONObject], bool]
_PLAIN: dict[int, tuple[Validator, Accepts | None]] = {}  # by the validator's id, kept alive with it


def _plain_check(validator: Validator) -> Accepts | None:
    """A check that accepts only arguments the validator accepts, for the schema most tools have (an object of
    properties of one JSON type each, some required): jsonschema takes some 90 calls to say yes to one such call.
    None for any other schema. What the check does not accept, jsonschema judges and describes."""
    kept = _PLAIN.get(id(validator))
    if kept is None:
        if len(_PLAIN) >= VALIDATORS_KEPT:
            _PLAIN.clear()
        kept = _PLAIN[id(validator)] = (validator, _plain(validator.schema))
    return kept[1]


def _plain(schema: object) -> Accepts | None:
    if not isinstance(schema, dict) or schema.get("type") != "object" or not _ANNOTATIONS.issuperset(
            schema.keys() - {"type", "properties", "required", "additionalProperties"}):
        return None
    properties, required = schema.get("properties", {}), schema.get("required", [])
    others_allowed = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list) or not isinstance(others_allowed, bool):
        return None
    types: dict[str, Callable[[object], bool] | None] = {}  # None: any value
    for name, property_schema in properties.items():
        if property_schema is True:
            types[name] = None
            continue
        if not isinstance(property_schema, dict) or not _ANNOTATIONS.issuperset(property_schema.keys() - {"type"}):
            return None
        kind = property_schema.get("type")
        if kind is not None and (not isinstance(kind, str) or kind not in _OF_TYPE):
            return None
        types[name] = None if kind is None else _OF_TYPE[kind]

    def accepts(arguments: JSONObject) -> bool:
        for name, value in arguments.items():
            if name in types:
                check = types[name]
                if check is not None and not check(value):
                    return False
            elif not others_allowed:
                return False
        return all(name in arguments for name in required)

    return accepts


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
