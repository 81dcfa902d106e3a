"""The upstream's models as Ollama's API lists (`GET /api/tags`) and shows (`POST /api/show`) them.

The upstream is a Chat Completions server: it says a model's name, maybe when it was made and its context, not
Ollama's file details. So sizes are 0, the details empty strings, and the digest a hash of the name (stable,
and shaped like Ollama's, which clients use as a key). Capabilities are what the door serves: completion and
tools (the gateway's MCP tools are offered whatever the model), vision only when the upstream says so.
"""

import hashlib
import time
from typing import Any

import orjson

_DETAILS = {"parent_model": "", "format": "", "family": "", "families": None, "parameter_size": "",
            "quantization_level": ""}
_ARCHITECTURE = "toolbridge"  # Ollama's model_info keys are prefixed by the architecture, which we do not know


def listed_models(body: bytes) -> list[dict[str, Any]]:
    """The entries of an upstream's `/models` answer (`{"data": [{"id": ...}]}`), those with a name."""
    try:
        data = orjson.loads(body).get("data")
    except (orjson.JSONDecodeError, AttributeError):
        return []
    return [entry for entry in data or [] if isinstance(entry, dict) and isinstance(entry.get("id"), str)]


def tags(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """`GET /api/tags`'s answer: each model in Ollama's shape."""
    return {"models": [_tag(entry) for entry in entries]}


def _tag(entry: dict[str, Any]) -> dict[str, Any]:
    name = entry["id"]
    return {"name": name, "model": name, "modified_at": _modified_at(entry.get("created")), "size": 0,
            "digest": hashlib.sha256(name.encode()).hexdigest(), "details": dict(_DETAILS)}


def _modified_at(created: Any) -> str:
    """The model's `created` (Unix seconds) in RFC 3339, else the epoch: the upstream did not say."""
    seconds = created if isinstance(created, int) and not isinstance(created, bool) and created > 0 else 0
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def shown(entry: dict[str, Any], context: int | None, vision: bool) -> dict[str, Any]:
    """`POST /api/show`'s answer for one model: what clients read of it (details, context, capabilities)."""
    info: dict[str, Any] = {"general.architecture": _ARCHITECTURE}
    if context:
        info[f"{_ARCHITECTURE}.context_length"] = context
    return {"modelfile": "", "parameters": "", "template": "", "details": dict(_DETAILS), "model_info": info,
            "capabilities": ["completion", "tools", *(["vision"] if vision else [])],
            "modified_at": _modified_at(entry.get("created"))}
