"""Encoding of what the gateway streams to clients: chunk payloads, in-stream errors and [DONE]."""

import json
from typing import Any

DONE = "[DONE]"


def encode(payload: dict[str, Any]) -> str:
    """One SSE `data:` payload; compact, UTF-8 kept as is."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
