"""The fields of a server's form question (MCP elicitation's `requestedSchema`): how each is shown to the person,
and how their words for it become the value the server expects. Pure: plain dicts in, no SDK.

The spec allows only flat properties of these shapes (mcp_types' PrimitiveSchemaDefinition): a string (with
`minLength`, `maxLength`, `format` email / uri / date / date-time), a number or integer (`minimum`, `maximum`),
a boolean, a single choice (`enum`, optionally the legacy `enumNames`, or `oneOf` of `{const, title}`), and a
multiple choice (an array whose `items` hold `enum` or `anyOf` of `{const, title}`, with `minItems`, `maxItems`).
Each may have `title`, `description` and `default`. Anything else is taken as text and passed on as typed.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime

from app.openai.wire import JSONValue

Value = str | int | float | bool | list[str]  # a form field's value, as MCP's elicitation allows them

_TRUE = frozenset({"yes", "y", "true", "t", "1", "on", "ok", "sure", "yep", "yeah"})
_FALSE = frozenset({"no", "n", "false", "f", "0", "off", "nope"})
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S+")
_FORMATS = {"email": "an email address", "uri": "a web address (URL)", "date": "a date (YYYY-MM-DD)",
            "date-time": "a date and time (YYYY-MM-DDTHH:MM)"}
_SAMPLES = {"email": "name@example.com", "uri": "https://example.com", "date": "2026-01-31",
            "date-time": "2026-01-31T19:30"}
_LONGEST_DESCRIPTION = 300


class Problem(ValueError):
    """A value the person gave that the field does not take; the message is shown to them."""


@dataclass(frozen=True)
class Field:
    """One property of the form, as the person is asked for it."""

    name: str
    label: str  # the title when the server gave one, else the name
    kind: str  # string, integer, number, boolean, choice, choices, or other
    required: bool
    spec: Mapping[str, JSONValue]  # the property's schema, for its constraints
    options: tuple[tuple[str, str], ...] = ()  # (value, label) of a choice or choices

    @property
    def default(self) -> Value | None:
        """The server's default, when it is a value a form field can have (MCP allows no other)."""
        default = self.spec.get("default")
        if isinstance(default, list):
            strings = [item for item in default if isinstance(item, str)]
            return strings if len(strings) == len(default) else None
        return None if isinstance(default, dict) else default

    def bounds(self, low: str, high: str) -> tuple[float | None, float | None]:
        """Two of the schema's numeric limits (`minimum`, `maxLength`...); None where it sets none, or not a number."""
        return _limit(self.spec.get(low)), _limit(self.spec.get(high))


def fields(schema: Mapping[str, JSONValue]) -> list[Field]:
    """The form's fields in the server's order."""
    properties = schema.get("properties")
    listed = schema.get("required")
    required = {name for name in listed if isinstance(name, str)} if isinstance(listed, list) else set()
    if not isinstance(properties, Mapping):
        return []
    found = []
    for name, spec in properties.items():
        spec = spec if isinstance(spec, Mapping) else {}
        kind, options = _kind(spec)
        label = spec.get("title") if isinstance(spec.get("title"), str) and spec.get("title") else name
        found.append(Field(str(name), str(label), kind, name in required, spec, options))
    return found


def _kind(spec: Mapping[str, JSONValue]) -> tuple[str, tuple[tuple[str, str], ...]]:
    kind = spec.get("type")
    if kind == "array":
        items = spec.get("items")
        return "choices", _options(items if isinstance(items, Mapping) else {})
    options = _options(spec)
    if options:
        return "choice", options
    return (kind, ()) if kind in ("string", "integer", "number", "boolean") else ("other", ())


def _options(spec: Mapping[str, JSONValue]) -> tuple[tuple[str, str], ...]:
    """The allowed values and their labels, in any of the spellings the spec allows."""
    enum, names = spec.get("enum"), spec.get("enumNames")
    if isinstance(enum, list):
        names = names if isinstance(names, list) else []
        values = [str(value) for value in enum]
        return tuple((value, str(names[i]) if i < len(names) else value) for i, value in enumerate(values))
    titled = spec.get("oneOf") or spec.get("anyOf")
    if isinstance(titled, list):
        return tuple((str(item["const"]), str(item.get("title") or item["const"]))
                     for item in titled if isinstance(item, Mapping) and "const" in item)
    return ()


def describe(field: Field) -> str:
    """One markdown list item: the field, what it takes, whether it is needed, its description, its default."""
    name = f"**{field.label}**" + (f" (`{field.name}`)" if field.label != field.name else "")
    line = f"- {name}: {_takes(field)}; {'required' if field.required else 'optional'}"
    description = " ".join(str(field.spec.get("description") or "").split())
    if description:
        cut = description[:_LONGEST_DESCRIPTION] + ("…" if len(description) > _LONGEST_DESCRIPTION else "")
        line += f". {cut.rstrip('.')}"
    if field.default is not None:  # after the description, so that the two do not run into each other
        line += f" (default: {shown(field, field.default)})"
    return line


def _takes(field: Field) -> str:
    spec = field.spec
    if field.kind in ("choice", "choices"):
        listed = ", ".join(f"{label} (`{value}`)" if label != value else f"`{value}`" for value, label in field.options)
        if field.kind == "choice":
            return f"one of {listed}"
        count = _bounds(spec.get("minItems"), spec.get("maxItems"), " choices")
        return f"any of {listed}, separated by commas" + (f" ({count.strip()})" if count else "")
    if field.kind == "string":
        text = _FORMATS.get(str(spec.get("format")), "text")
        length = _bounds(spec.get("minLength"), spec.get("maxLength"), " characters")
        return text + ("," + length if length else "")
    if field.kind in ("integer", "number"):
        return ("a whole number" if field.kind == "integer" else "a number") + _bounds(
            spec.get("minimum"), spec.get("maximum"), "")
    return "yes or no" if field.kind == "boolean" else "a value"


def _bounds(low: JSONValue, high: JSONValue, unit: str) -> str:
    """The range a field allows, in words, with a leading space; empty when it has none."""
    if low is not None and high is not None:
        return f" from {low} to {high}{unit}"
    if low is not None:
        return f" at least {low}{unit}"
    return f" at most {high}{unit}" if high is not None else ""


def shown(field: Field, value: object) -> str:
    """A value as the person would type it: a choice by its label."""
    labels = dict(field.options)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(labels.get(str(item), str(item)) for item in value)
    return labels.get(str(value), str(value))


def sample(field: Field) -> str:
    """A value to show in the example answer: the default, the first option, or one of the right type."""
    if field.default is not None:
        return shown(field, field.default)
    if field.options:
        return field.options[0][1]
    samples = {"integer": str(field.spec.get("minimum", 1)), "number": str(field.spec.get("minimum", 1.5)),
               "boolean": "yes", "string": _SAMPLES.get(str(field.spec.get("format")), "…")}
    return samples.get(field.kind, "…")


def convert(field: Field, text: str) -> Value:
    """The person's words for a field as the value the server expects; `Problem` says why they are not."""
    text = text.strip()
    if field.kind == "boolean":
        return _boolean(field, text)
    if field.kind in ("integer", "number"):
        return _number(field, text)
    if field.kind == "choice":
        return _choice(field, text)
    if field.kind == "choices":
        return _choices(field, text)
    if field.kind == "string":
        return _string(field, text)
    return text


def _boolean(field: Field, text: str) -> bool:
    word = text.lower().rstrip(".!")
    if word in _TRUE or word in _FALSE:
        return word in _TRUE
    raise Problem(f"{field.label} must be yes or no.")


def _number(field: Field, text: str) -> int | float:
    cleaned = text.replace("_", "").replace(" ", "")
    try:
        number = float(cleaned)
    except ValueError:
        number = float("nan")
    whole = field.kind == "integer"
    if number != number or number in (float("inf"), float("-inf")) or (whole and not number.is_integer()):
        raise Problem(f"{field.label} must be {'a whole number' if whole else 'a number'}.")
    value: int | float = int(number) if whole or re.fullmatch(r"[+-]?\d+", cleaned) else number
    low, high = field.bounds("minimum", "maximum")
    if (low is not None and value < low) or (high is not None and value > high):
        raise Problem(f"{field.label} must be{_bounds(low, high, '')}.")
    return value


def _choice(field: Field, text: str) -> str:
    wanted = text.strip().strip("`\"'").casefold()
    for value, label in field.options:
        if wanted in (value.casefold(), label.casefold()):
            return value
    allowed = ", ".join(label for _, label in field.options)
    raise Problem(f"{field.label} must be one of: {allowed}.")


def _choices(field: Field, text: str) -> list[str]:
    chosen: list[str] = []
    for part in re.split(r"[,;\n]", text):
        if part.strip():
            value = _choice(field, part)
            chosen += [] if value in chosen else [value]
    low, high = field.bounds("minItems", "maxItems")
    if (low is not None and len(chosen) < low) or (high is not None and len(chosen) > high):
        raise Problem(f"{field.label} takes{_bounds(low, high, ' choices')}.")
    return chosen


def _string(field: Field, text: str) -> str:
    if text.strip("`'\" ") in ("…", "...", ""):  # the example's placeholder, pasted as it was shown
        raise Problem(f"{field.label} needs a value of yours in place of the example's `…`.")
    low, high = field.bounds("minLength", "maxLength")
    if (low is not None and len(text) < low) or (high is not None and len(text) > high):
        raise Problem(f"{field.label} must be{_bounds(low, high, ' characters')} long.")
    kind = field.spec.get("format")
    if kind in _FORMATS and not _has_format(str(kind), text):
        raise Problem(f"{field.label} must be {_FORMATS[str(kind)]}.")
    return text


def _has_format(kind: str, text: str) -> bool:
    if kind == "email":
        return _EMAIL.fullmatch(text) is not None
    if kind == "uri":
        return _URI.fullmatch(text) is not None
    try:
        (date.fromisoformat if kind == "date" else datetime.fromisoformat)(text)
    except ValueError:
        return False
    return kind == "date" or "T" in text.upper() or " " in text


def _limit(value: JSONValue) -> float | None:
    """A limit as a number; None for none, and for what is no number (a server's "5" or true)."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None
