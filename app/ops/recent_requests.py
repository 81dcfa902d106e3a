"""The last chat requests' tool offers, for people to look at (`GET /ui/requests`, `GET /ui/events`): how many
tools each request was offered, how many the tool budget withheld, which, and why. "The model does not see
my tool" is often this, and a log line is not where a person looks first.

Only names and counts are kept, never what the user wrote.
"""

import time
from collections import deque
from collections.abc import Sequence
from contextvars import ContextVar
from typing import TypedDict

import anyio
import structlog

from app.access import CURRENT_SCOPE, EVERYTHING, KeyScope

# The API a request came through ("chat", "responses", "messages", "ollama": each door's name, app/doors/), set by its
# route: the loop that records the request knows nothing of HTTP.
DOOR: ContextVar[str] = ContextVar("toolbridge_door", default="chat")
RECENT_REQUESTS = 100
NAMES_KEPT = 50  # of the withheld tools' names, per request (the count says how many in all)


class RequestEntry(TypedDict):
    """One chat request's tool offer, as the status page is given it."""

    number: int
    at: float
    request_id: str | None
    model: str | None
    door: str
    tools_offered: int
    tools_withheld: int
    withheld: list[str]
    why: str | None


class RecentRequests:
    def __init__(self, size: int = RECENT_REQUESTS) -> None:
        self._requests: deque[tuple[str, RequestEntry]] = deque(maxlen=size)  # by the key that made it
        # Made when someone waits (the status page's long poll): not one per request for nobody.
        self._added: anyio.Event | None = None
        self.count = 0  # requests ever added: a reader that saw `count` knows which ones are new

    def add(self, model: str | None, offered: int, withheld: Sequence[str], why: str) -> None:
        self.count += 1
        self._requests.append((CURRENT_SCOPE.get().caller, {
            "number": self.count,
            "at": time.time(),
            "request_id": structlog.contextvars.get_contextvars().get("request_id"),
            "model": model,
            "door": DOOR.get(),
            "tools_offered": offered,
            "tools_withheld": len(withheld),
            "withheld": list(withheld[:NAMES_KEPT]),
            "why": why or None,
        }))
        if self._added is not None:
            self._added.set()
            self._added = None

    def entries(self, after: int = 0, scope: KeyScope = EVERYTHING) -> list[RequestEntry]:
        """The requests kept, oldest first; with `after`, only those numbered past it; those `scope`'s key may see."""
        return [entry for caller, entry in self._requests if entry["number"] > after and scope.sees_caller(caller)]

    async def next_request(self) -> None:
        """Returns when the next request is added."""
        if self._added is None:
            self._added = anyio.Event()
        await self._added.wait()
