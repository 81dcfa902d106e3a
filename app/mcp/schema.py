"""Pure JSON Schema rewrites that make MCP input schemas safe for each upstream's tool-call parser.

LM Studio and llama.cpp turn a tool's schema into a grammar and fail on much of JSON Schema
(`$ref`, `not`, `true` subschemas, unanchored patterns, huge repetition bounds). The grammar-safe
profile rewrites a copy; the original is kept for validating arguments. Nothing here knows MCP or
OpenAI types: schemas in, schemas out.
"""

import copy
import enum
import json
import re

from app.openai.wire import JSONObject, JSONValue
from app.settings.vocabularies import Profile

# Length and item bounds above this make llama.cpp expand huge repetition rules; they are dropped.
MAX_GRAMMAR_BOUND = 100
# Numeric bounds this large are sentinels (sys.maxsize, 2**53), not real limits.
MAX_NUMERIC_BOUND = 10**15
_ANNOTATION_KEYS = ("$schema", "$id", "$comment", "$anchor", "$dynamicAnchor", "not", "default", "examples")
_LENGTH_BOUNDS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")
_NUMERIC_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_SINGLE = ("items", "additionalProperties", "contains", "if", "then", "else", "propertyNames")
# Regex features llama.cpp's pattern-to-grammar conversion does not understand.
_UNSAFE_PATTERN = re.compile(
    r"\(\?[=!<:PiImMsSxXuUaL-]|\\[1-9bBAzZGpPk]|[*+?}]\?|[*+?}]\+"
)
# Its grammars know no shorthand classes and few escapes: a pattern's `\d` became "\d" in the grammar, which then
# failed to parse, and the upstream refused the whole request (Brave Search's date patterns did it to every request
# that offered them). Spelled out as classes: inside one, and standing alone.
_CLASS_ESCAPES = {"d": "0-9", "w": "A-Za-z0-9_", "s": " \\t\\n\\r"}
_CONVERTER_ESCAPES = set("()|{}*+?")  # escapes the converter reads itself, outside a class


def to_profile(schema: JSONObject | None, profile: Profile) -> tuple[JSONObject, bool]:
    """The `parameters` to send for `profile`, and whether OpenAI strict mode can be set."""
    root = object_root(schema)
    if profile == "passthrough":
        return root, False
    if profile == "openai":
        return root, meets_strict_mode(root)
    return grammar_safe(root), False


def object_root(schema: JSONObject | None) -> JSONObject:
    """A copy that is always `{"type": "object", "properties": {...}, ...}` at the root."""
    root = copy.deepcopy(dict(schema or {}))
    root["type"] = "object"
    if not isinstance(root.get("properties"), dict):
        root["properties"] = {}
    return root


def grammar_safe(schema: JSONObject) -> JSONObject:
    """The lmstudio/llamacpp rewrite: refs inlined, unsupported keywords dropped, hints put into words."""
    definitions = {**_as_dict(schema.get("definitions")), **_as_dict(schema.get("$defs"))}
    inlined = _inline_refs(schema, definitions, trail=())
    safe = _make_safe(inlined)
    assert isinstance(safe, dict)  # a dict in (`_inline_refs` keeps a dict a dict), a dict out
    safe["type"] = "object"
    safe.setdefault("properties", {})
    return safe


def meets_strict_mode(schema: JSONObject) -> bool:
    """OpenAI strict mode: every object closed with all properties required, no unsupported keywords."""
    if "anyOf" in schema or "oneOf" in schema:  # the root must be a plain object
        return False
    return _strict_ok(schema, depth=0)


def _strict_ok(node: JSONValue, depth: int) -> bool:
    if not isinstance(node, dict) or depth > 10:
        return False
    if any(key in node for key in ("allOf", "oneOf", "not", "if", "then", "else", "dependentRequired",
                                   "dependentSchemas", "patternProperties", "unevaluatedProperties")):
        return False
    types = node.get("type")
    is_object = types == "object" or (isinstance(types, list) and "object" in types) or "properties" in node
    if is_object:
        properties = node.get("properties") or {}
        if node.get("additionalProperties") is not False:
            return False
        required = node.get("required") or []
        if not isinstance(properties, dict) or not isinstance(required, list):
            return False  # not a JSON Schema (a `.values()` or a sort raised here, or a text's letters matched)
        names = [name for name in required if isinstance(name, str)]
        if len(names) != len(required) or sorted(names) != sorted(properties):
            return False
        if not all(_strict_ok(sub, depth + 1) for sub in properties.values()):
            return False
    if "items" in node and not _strict_ok(node["items"], depth + 1):
        return False
    options = node.get("anyOf") or []
    return isinstance(options, list) and all(_strict_ok(sub, depth + 1) for sub in options)


def _inline_refs(node: JSONValue, definitions: JSONObject, trail: tuple[str, ...]) -> JSONValue:
    if isinstance(node, list):
        return [_inline_refs(item, definitions, trail) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = _local_definition(ref)
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        if name is None or name not in definitions:
            return _inline_refs({**siblings, "type": siblings.get("type", "object")}, definitions, trail)
        if name in trail:
            # A cycle: the grammar cannot recurse, so the inner level becomes an open object, named in words.
            note = f"An object of the same shape as '{name}'."
            return {"type": "object", "description": _join(siblings.get("description"), note)}
        target = _inline_refs(definitions[name], definitions, (*trail, name))
        merged = {**target, **_inline_children(siblings, definitions, trail)} if isinstance(target, dict) else target
        return merged
    return _inline_children(node, definitions, trail)


def _inline_children(node: JSONObject, definitions: JSONObject, trail: tuple[str, ...]) -> JSONObject:
    """A schema without a `$ref` of its own: its subschemas' refs inlined, its definitions left out."""
    return {
        key: _inline_refs(value, definitions, trail)
        for key, value in node.items()
        if key not in ("$defs", "definitions")
    }


def _local_definition(ref: str) -> str | None:
    for prefix in ("#/$defs/", "#/definitions/"):
        if ref.startswith(prefix):
            return ref[len(prefix):].replace("~1", "/").replace("~0", "~")
    return None


def _make_safe(node: JSONValue) -> JSONValue:
    if node is True:
        return {}
    if not isinstance(node, dict):
        return node
    node = _collapse_nullable(dict(node))
    out: JSONObject = {}
    for key, value in node.items():
        safe = _safe_keyword(key, value)
        if not isinstance(safe, _Dropped):
            out[key] = safe
    required, properties = out.get("required"), out.get("properties")
    if isinstance(required, list) and isinstance(properties, dict):
        out["required"] = [name for name in required if name in properties]
    hints = _hints(node)
    if hints:
        out["description"] = _join(_sentence(out.get("description")), " ".join(hints))
    return out


class _Dropped(enum.Enum):
    """What `_safe_keyword` returns for a keyword the grammar-safe schema leaves out."""

    DROPPED = "dropped"


_DROPPED = _Dropped.DROPPED


def _safe_keyword(key: str, value: JSONValue) -> "JSONValue | _Dropped":
    """One keyword's value in the grammar-safe schema (its subschemas made safe too), or `_DROPPED`."""
    if key in _ANNOTATION_KEYS:
        return _DROPPED  # `default` lives on in the description (`_hints`)
    if key in _LENGTH_BOUNDS and (not isinstance(value, int) or value > MAX_GRAMMAR_BOUND):
        return _DROPPED
    if key in _NUMERIC_BOUNDS and (not isinstance(value, int | float) or abs(value) > MAX_NUMERIC_BOUND):
        return _DROPPED
    if key == "additionalProperties" and isinstance(value, bool):
        return _DROPPED  # false breaks some grammars; true is the default
    if key == "pattern":
        anchored = anchor_pattern(value)
        return _DROPPED if anchored is None else anchored
    if key in _SUBSCHEMA_MAPS and isinstance(value, dict):
        return {name: _make_safe(sub) for name, sub in value.items() if sub is not False}
    if key in _SUBSCHEMA_LISTS and isinstance(value, list):
        kept = [_make_safe(sub) for sub in value if sub is not False]
        return kept or _DROPPED
    if key in _SUBSCHEMA_SINGLE:
        return _DROPPED if isinstance(value, bool) else _make_safe(value)
    return value


def _hints(node: JSONObject) -> list[str]:
    """What the dropped keywords said, in words for the description: "One of: …" before "(default: …)"."""
    hints: list[str] = []
    enum_values, default = node.get("enum"), node.get("default")
    if isinstance(enum_values, list):  # the enum itself stays as well
        hints.append("One of: " + ", ".join(_literal(v) for v in enum_values) + ".")
    if default is not None:  # a null default only says "optional"
        hints.append(f"(default: {_literal(default)})")
    return hints


def _collapse_nullable(node: JSONObject) -> JSONObject:
    """`anyOf: [X, {type: null}]` and `type: [X, "null"]` become plain X; the model may still omit it."""
    types = node.get("type")
    if isinstance(types, list) and "null" in types:
        rest = [t for t in types if t != "null"]
        node["type"] = rest[0] if len(rest) == 1 else rest
    for key in ("anyOf", "oneOf"):
        options = node.get(key)
        if not isinstance(options, list):
            continue
        rest = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
        if len(rest) == len(options):
            continue
        if len(rest) == 1 and isinstance(rest[0], dict):
            del node[key]
            merged = {**rest[0], **node}
            merged["description"] = _join(rest[0].get("description"), node.get("description"))
            if not merged["description"]:
                del merged["description"]
            return _collapse_nullable(merged)
        node[key] = rest
    return node


def anchor_pattern(pattern: object) -> str | None:
    """`pattern` as a whole-string match (`^...$`) with JSON Schema's search meaning kept, or None."""
    if not isinstance(pattern, str) or _UNSAFE_PATTERN.search(pattern):
        return None
    try:
        re.compile(pattern)
    except re.error:
        return None
    core = _spelled_out(pattern)
    if core is None:
        return None
    starts = core.startswith("^")
    ends = core.endswith("$") and not core.endswith("\\$")
    if starts and ends:
        return core
    core = core[1:] if starts else core
    core = core[:-1] if ends else core
    return f"^{'' if starts else '.*'}({core}){'' if ends else '.*'}$"


def _spelled_out(pattern: str) -> str | None:
    """The pattern with the escapes a grammar cannot read spelled out (`\\d` as `[0-9]`, `\\/` as `/`), or None
    when one cannot be (`\\D`, `\\-` inside a class)."""
    spelled, in_class, index = [], False, 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            escape = _escape(pattern[index + 1], in_class)
            if escape is None:
                return None
            spelled.append(escape)
            index += 2
            continue
        in_class = True if char == "[" else False if char == "]" else in_class
        spelled.append(char)
        index += 1
    return "".join(spelled)


def _escape(char: str, in_class: bool) -> str | None:
    """One escaped character as llama.cpp's converter and grammar parser both read it, or None."""
    if char in _CLASS_ESCAPES:
        return _CLASS_ESCAPES[char] if in_class else f"[{_CLASS_ESCAPES[char]}]"
    if char in "ntr\\[]" or (not in_class and char in _CONVERTER_ESCAPES):
        return f"\\{char}"
    if char.isalnum() or char == "^" or (in_class and char == "-"):
        return None
    if not in_class and char in ".$":
        return f"[{char}]"  # a class of one: the grammar has no escape for them
    return char  # punctuation that is itself unescaped: `\\/`, `\\:`, `\\"`


def _literal(value: JSONValue) -> str:
    return f"'{value}'" if isinstance(value, str) else json.dumps(value)


def _sentence(text: JSONValue) -> JSONValue:
    """A description that the hints can follow: closed with a full stop unless it already ends a clause."""
    if isinstance(text, str) and text.strip() and text.strip()[-1] not in ".!?:;)":
        return text.strip() + "."
    return text


def _join(*parts: JSONValue) -> str:
    return " ".join(str(p).strip() for p in parts if isinstance(p, str) and p.strip())


def _as_dict(value: JSONValue) -> JSONObject:
    return value if isinstance(value, dict) else {}
