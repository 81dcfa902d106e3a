"""The upstream's models as Ollama's API lists (`GET /api/tags`) and shows (`POST /api/show`) them.

The upstream is a Chat Completions server: it says a model's name, maybe when it was made and its context, not
Ollama's file details. So sizes are 0, the details empty strings, and the digest a hash of the name (stable,
and shaped like Ollama's, which clients use as a key). Capabilities are what the door serves: completion and
tools (the gateway's MCP tools are offered whatever the model), vision only when the upstream says so.
"""

import hashlib
import time

import orjson

from app.doors.ollama.wire import Details, Shown, Tag, Tags
from app.openai.wire import JSONObject, JSONValue

_DETAILS: Details = {"parent_model": "", "format": "", "family": "", "families": None, "parameter_size": "",
                     "quantization_level": ""}
_ARCHITECTURE = "toolbridge"  # Ollama's model_info keys are prefixed by the architecture, which we do not know


def listed_models(body: bytes) -> list[JSONObject]:
    """The entries of an upstream's `/models` answer (`{"data": [{"id": ...}]}`), those with a name (a string)."""
    try:
        answer: JSONValue = orjson.loads(body)
    except orjson.JSONDecodeError:
        return []
    if not isinstance(answer, dict):
        return []
    data = answer.get("data")
    if isinstance(data, list):
        return [entry for entry in data if isinstance(entry, dict) and isinstance(entry.get("id"), str)]
    if data and not isinstance(data, str | dict):  # a number or true, which is no list to read entries of
        raise TypeError(f"'{type(data).__name__}' object is not iterable")
    return []


def tags(entries: list[JSONObject]) -> Tags:
    """`GET /api/tags`'s answer: each model in Ollama's shape."""
    return {"models": [_tag(entry) for entry in entries]}


def _tag(entry: JSONObject) -> Tag:
    name = str(entry["id"])  # a string: listed_models took only those
    return {"name": name, "model": name, "modified_at": _modified_at(entry.get("created")), "size": 0,
            "digest": hashlib.sha256(name.encode()).hexdigest(), "details": _DETAILS.copy()}


def _modified_at(created: JSONValue) -> str:
    """The model's `created` (Unix seconds) in RFC 3339, else the epoch: the upstream did not say."""
    seconds = created if isinstance(created, int) and not isinstance(created, bool) and created > 0 else 0
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def shown(entry: JSONObject, context: int | None, vision: bool) -> Shown:
    """`POST /api/show`'s answer for one model: what clients read of it (details, context, capabilities)."""
    info: dict[str, str | int] = {"general.architecture": _ARCHITECTURE}
    if context:
        info[f"{_ARCHITECTURE}.context_length"] = context
    return {"modelfile": "", "parameters": "", "template": "", "details": _DETAILS.copy(), "model_info": info,
            "capabilities": ["completion", "tools", *(["vision"] if vision else [])],
            "modified_at": _modified_at(entry.get("created"))}
