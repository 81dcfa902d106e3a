"""The last tool calls, for people to look at (`GET /ui/calls`, `GET /ui/events`): a bounded ring.

Each entry says when, for which request, which tool, how long, and how it ended.
A call to a name no tool has is there too (`server` null, outcome `unknown_tool`): it is what "my model
does not call the tool" often turns out to be.
What the model sent and read, and the error's message, are kept only with TOOLBRIDGE_UI_SHOW_VALUES: they may
be private (a tool's error often repeats its arguments), and the page may be shown on a screen others see.
Without it `error` is only the error's class (tool_error, timeout, invalid_arguments...).
"""

import time
from collections import deque
from typing import NotRequired, TypedDict

import anyio
import structlog

from app.access import CURRENT_SCOPE, EVERYTHING, KeyScope
from app.ops.call_record import CallRecord

RECENT_CALLS = 200


class CallEntry(TypedDict):
    """One tool call as the status page is given it; its values only when they are shown."""

    number: int
    at: float
    request_id: str | None
    server: str | None
    tool: str
    duration_ms: float
    outcome: str
    error: str | None  # the kind of failure; with the values shown, the failure's message
    arguments: NotRequired[str]
    result: NotRequired[str]


class RecentCalls:
    def __init__(self, size: int = RECENT_CALLS, show_values: bool = False) -> None:
        self._calls: deque[tuple[str, CallEntry]] = deque(maxlen=size)  # by the key that made it
        self._show_values = show_values
        # Made when someone waits (the status page's long poll): not one per call for nobody.
        self._added: anyio.Event | None = None
        self.count = 0  # calls ever added: a reader that saw `count` knows which ones are new

    def add(self, call: CallRecord) -> None:
        entry: CallEntry = {
            "number": self.count + 1,
            "at": time.time(),
            "request_id": structlog.contextvars.get_contextvars().get("request_id"),
            "server": call.server,
            "tool": call.tool,
            "duration_ms": round(call.seconds * 1000, 1),
            "outcome": call.outcome,
            "error": _error_class(call.outcome),
        }
        if self._show_values:
            entry |= {"arguments": call.arguments, "result": call.result, "error": call.error}
        self.count += 1
        self._calls.append((CURRENT_SCOPE.get().caller, entry))
        if self._added is not None:
            self._added.set()
            self._added = None

    def entries(self, after: int = 0, scope: KeyScope = EVERYTHING) -> list[CallEntry]:
        """The calls kept, oldest first; with `after`, only those numbered past it; those `scope`'s key may see."""
        return [call for caller, call in self._calls if call["number"] > after and scope.sees_caller(caller)]

    async def next_call(self) -> None:
        """Returns when the next call is added."""
        if self._added is None:
            self._added = anyio.Event()
        await self._added.wait()


def _error_class(outcome: str) -> str | None:
    """What kind of failure, in words the gateway chose: a tool's own failure is `error` among the outcomes
    (the metrics' label) and `tool_error` in the envelope the model reads, whose name is kept here."""
    if outcome in ("ok", "input_needed"):  # a call the server holds for the person's answers did not fail
        return None
    return "tool_error" if outcome == "error" else outcome
