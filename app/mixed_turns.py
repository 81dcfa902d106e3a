"""What the gateway must remember between requests: MCP calls made in a turn that it handed to the client.

When one model turn calls both a client tool and an MCP tool, the MCP call runs and the client gets
only its own call. When the client comes back with its result, the model must see the whole turn
again: the assistant message with every call, and the MCP results. Bounded and expiring, in memory.
"""

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

MAX_ENTRIES = 1_000
TTL_SECONDS = 3_600.0


@dataclass(frozen=True)
class _Entry:
    assistant: dict[str, Any]
    tool_messages: list[dict[str, Any]]
    stored_at: float


class MixedTurns:
    """The MCP half of each mixed turn, kept until the client comes back with its own calls' results."""

    def __init__(self, max_entries: int = MAX_ENTRIES, ttl: float = TTL_SECONDS) -> None:
        self._entries: OrderedDict[frozenset[str], _Entry] = OrderedDict()
        self._max_entries = max_entries
        self._ttl = ttl

    def __len__(self) -> int:
        return len(self._entries)

    def remember(
        self, client_call_ids: list[str], assistant: dict[str, Any], tool_messages: list[dict[str, Any]]
    ) -> None:
        key = frozenset(client_call_ids)
        self._entries[key] = _Entry(assistant, tool_messages, time.monotonic())
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    def restore(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The history with each remembered turn made whole again; unchanged when nothing matches."""
        if not self._entries:
            return messages
        self._expire()
        restored: list[dict[str, Any]] = []
        for message in messages:
            entry = self._match(message)
            if entry is None:
                restored.append(message)
                continue
            restored.append({**message, "tool_calls": entry.assistant["tool_calls"]})
            restored.extend(entry.tool_messages)
        return restored

    def _match(self, message: dict[str, Any]) -> _Entry | None:
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            return None
        ids = frozenset(str(call.get("id")) for call in message["tool_calls"] if isinstance(call, dict))
        return self._entries.get(ids)

    def _expire(self) -> None:
        cutoff = time.monotonic() - self._ttl
        while self._entries and next(iter(self._entries.values())).stored_at < cutoff:
            self._entries.popitem(last=False)
