"""A client's own tools made smaller, for a context they would otherwise crowd.

Open WebUI sends 36 tools (about 23,000 characters as JSON) with every chat: more than half of an 8k-token
context by themselves. Most of that is prose: a description of usage notes, and a description on every
parameter. A compact tool keeps everything a call depends on (its name, the parameters' names, types,
enums, required list and structure) and its description's first sentence; parameter descriptions go. The
client still gets the calls the model makes by the same name, and runs them as before.
"""

import re

from app.openai.wire import JSONObject, JSONValue, Tool

DESCRIPTION_CHARS = 200  # of a tool's description, at most: its first sentence, cut if longer
_FIRST_SENTENCE = re.compile(r"(.+?[.!?])(?=\s|$)", re.DOTALL)
_ANNOTATIONS = frozenset({"description", "title", "examples", "$comment"})
# Where a JSON Schema holds further schemas: one, a list of them, or a map of names to them.
_ONE = frozenset({"items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames"})
_LIST = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_MAP = frozenset({"properties", "$defs", "definitions", "patternProperties", "dependentSchemas"})


def compact_tool(tool: Tool) -> Tool:
    """The tool with its description cut to its first sentence and its schema's annotations left out."""
    function = tool.get("function")
    if not isinstance(function, dict):
        return tool
    compact = function.copy()
    if isinstance(description := function.get("description"), str):
        compact["description"] = first_sentence(description)
    if isinstance(parameters := function.get("parameters"), dict):
        compact["parameters"] = without_annotations(parameters)
    return {**tool, "function": compact}


def first_sentence(text: str, limit: int = DESCRIPTION_CHARS) -> str:
    stripped = text.strip()
    match = _FIRST_SENTENCE.match(stripped)
    sentence = match.group(1) if match else stripped
    return sentence if len(sentence) <= limit else sentence[: limit - 3].rstrip() + "..."


def without_annotations(schema: JSONObject) -> JSONObject:
    """The schema without the words written for people (descriptions, titles, examples). Only schema
    keywords are touched: a property that is itself named `description` keeps its place."""
    kept: JSONObject = {}
    for key, value in schema.items():
        if key in _ANNOTATIONS:
            continue
        if key in _ONE:
            kept[key] = _without_annotations(value)
        elif key in _LIST and isinstance(value, list):
            kept[key] = [_without_annotations(item) for item in value]
        elif key in _MAP and isinstance(value, dict):
            kept[key] = {name: _without_annotations(item) for name, item in value.items()}
        else:  # enum, const, default, required, type...: data the call depends on, kept as they are
            kept[key] = value
    return kept


def _without_annotations(schema: JSONValue) -> JSONValue:
    return without_annotations(schema) if isinstance(schema, dict) else schema
