"""What a grammar-safe tool list must not contain, checked over a whole tool definition."""

import re
from typing import Any

from app.mcp.schema import MAX_GRAMMAR_BOUND

OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
DROPPED_KEYS = {"$ref", "$defs", "definitions", "$schema", "$id", "not", "default"}


def grammar_problems(tool: dict[str, Any]) -> list[str]:
    """Every place in a tool's parameters that LM Studio's or llama.cpp's grammar would trip on."""
    found: list[str] = []
    if not OPENAI_NAME.match(tool["function"]["name"]):
        found.append(f"name {tool['function']['name']!r}")
    _walk(tool["function"]["parameters"], "parameters", found, schema=True)
    return found


def _walk(node: Any, where: str, found: list[str], schema: bool) -> None:
    if isinstance(node, bool):
        if schema:
            found.append(f"{where}: boolean subschema")
        return
    if isinstance(node, list):
        for i, item in enumerate(node):
            _walk(item, f"{where}[{i}]", found, schema)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        path = f"{where}.{key}"
        if not schema:  # a map of property names to schemas
            _walk(value, path, found, schema=True)
            continue
        if key in DROPPED_KEYS or (key == "additionalProperties" and value is False):
            found.append(path)
        elif key == "pattern" and not (isinstance(value, str) and value.startswith("^") and value.endswith("$")):
            found.append(f"{path}: unanchored")
        elif key in ("maxLength", "minLength", "maxItems", "minItems") and value > MAX_GRAMMAR_BOUND:
            found.append(f"{path}: {value}")
        elif key in ("properties", "patternProperties"):
            _walk(value, path, found, schema=False)
        elif key in ("items", "anyOf", "oneOf", "allOf", "additionalProperties", "prefixItems"):
            _walk(value, path, found, schema=True)
