"""TOOLBRIDGE_NOTIFY_URL: a webhook hears when someone must act, so a call held for a person does not wait on
someone who is not looking at the chat.

Three notices, each sent once: a call waited for the person's yes longer than TOOLBRIDGE_NOTIFY_AFTER (the rounds of
this process's status page list), an MCP server needs a sign-in, a tool's definition changed since it was pinned.
Each has a link to the status page. The body is JSON with the notice's words as `text` (what Slack, Mattermost and
most chat tools' incoming webhooks read), or `{"text": ...}` alone (TOOLBRIDGE_NOTIFY_FORMAT=slack).

Never in a notice: a key, a token, a server's error text (it may carry its stderr), or a call's argument values
unless TOOLBRIDGE_NOTIFY_VALUES says so. The URL itself is a secret (a Slack webhook's path is its credential): the
log names the webhook's host at most. A webhook that fails or is slow costs a warning; nothing waits on it.
"""

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

import anyio
import httpx
import structlog

from app.mcp import Change
from app.ops.waiting_rounds import WaitingRound, WaitingRounds

log = structlog.get_logger("toolbridge.notify")

SEND_TIMEOUT = 5.0
LONGEST_INTERVAL = 5.0  # seconds between looks at the waiting calls, at most
MAX_DIFF_CHARS = 2000

Event = Literal["call_waiting", "sign_in_needed", "definition_changed"]


@dataclass(frozen=True)
class Notice:
    event: Event
    text: str
    link: str
    server: str | None = None
    tool: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def body(self, fmt: Literal["json", "slack"]) -> dict[str, Any]:
        if fmt == "slack":
            return {"text": f"{self.text} {self.link}"}
        return {"event": self.event, "text": self.text, "server": self.server, "tool": self.tool, "link": self.link,
                **self.details}


class Watched(Protocol):
    """What the notifier watches of the MCP pool."""

    def health(self) -> Any: ...

    def definition_changes(self) -> list[Change]: ...

    async def next_change(self) -> None: ...


class Notifier:
    def __init__(self, url: str, link: str, *, fmt: Literal["json", "slack"] = "json", after: float = 300.0,
                 values: bool = False, transport: httpx.AsyncBaseTransport | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self._url, self._link, self._fmt, self._after, self._values = url, link, fmt, after, values
        self._client = httpx.AsyncClient(timeout=SEND_TIMEOUT, transport=transport, follow_redirects=False)
        self._clock = clock
        self._told: set[str] = set()  # what was sent, so each notice goes once
        self._signed_in_asked: set[str] = set()

    async def watch(self, pool: Watched, waiting: WaitingRounds | None) -> None:
        """Looks at every change of the pool, and at the waiting calls every few seconds, until cancelled."""
        interval = min(LONGEST_INTERVAL, max(self._after / 2, 0.05))
        try:
            while True:
                for notice in [*self._waiting(waiting), *self._sign_ins(pool), *self._changes(pool)]:
                    await self.send(notice)
                with anyio.move_on_after(interval):
                    await pool.next_change()
        finally:
            with anyio.CancelScope(shield=True):
                await self._client.aclose()

    async def send(self, notice: Notice) -> None:
        try:
            answer = await self._client.post(self._url, json=notice.body(self._fmt))
            answer.raise_for_status()
        except httpx.HTTPError as exc:
            log.warning("notice_not_delivered", notice=notice.event, webhook=urlsplit(self._url).hostname,
                        error=type(exc).__name__, status=getattr(getattr(exc, "response", None), "status_code", None))
            return
        log.info("notice_sent", notice=notice.event, server=notice.server, tool=notice.tool)

    def _waiting(self, waiting: WaitingRounds | None) -> list[Notice]:
        if waiting is None:
            return []
        now, rounds = self._clock(), waiting.everyone()
        listed = {f"waiting:{held.id}" for held in rounds}
        self._told = {told for told in self._told if not told.startswith("waiting:") or told in listed}
        return [self._waited(held, now) for held in rounds
                if now - held.asked_at >= self._after and self._first(f"waiting:{held.id}")]

    def _waited(self, held: WaitingRound, now: float) -> Notice:
        names = ", ".join(f"{call.tool} ({call.server})" if call.server else call.tool for call in held.calls)
        waited = now - held.asked_at
        length = f"{max(1, round(waited))} s" if waited < 90 else f"{round(waited / 60)} min"
        details: dict[str, Any] = {"reference": held.reference, "waited_seconds": round(now - held.asked_at)}
        if self._values:
            details["calls"] = [{"tool": c.tool, "server": c.server, "arguments": c.arguments} for c in held.calls]
        first = held.calls[0] if held.calls else None
        return Notice("call_waiting", f"A tool call has waited {length} for a person's approval: {names} "
                      f"(Approval {held.reference}). Answer in the chat or on the status page.", self._link,
                      first.server if first else None, first.tool if first else None, details)

    def _sign_ins(self, pool: Watched) -> list[Notice]:
        needing = {name for name, status in pool.health().items() if status.get("state") == "needs_sign_in"}
        self._signed_in_asked &= needing  # signed in since: told again should it need one again
        notices = [Notice("sign_in_needed", f"The MCP server '{name}' needs a sign-in before its tools can be used: "
                          "press Sign in on the status page.", self._link, name)
                   for name in sorted(needing - self._signed_in_asked)]
        self._signed_in_asked |= needing
        return notices

    def _changes(self, pool: Watched) -> Sequence[Notice]:
        return [Notice("definition_changed", f"The MCP server '{change.server}' changed the definition of its tool "
                       f"'{change.tool}' since it was pinned: it asks before every call until an operator accepts "
                       "it on the status page.", self._link, change.server, change.tool,
                       {"diff": change.diff[:MAX_DIFF_CHARS]})
                for change in pool.definition_changes()
                if self._first(f"changed:{change.server}/{change.tool}/{hash(change.now)}")]

    def _first(self, what: str) -> bool:
        if what in self._told:
            return False
        self._told.add(what)
        return True
