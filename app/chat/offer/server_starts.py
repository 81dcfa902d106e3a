"""MCP servers still starting when a chat comes: the first seconds after the gateway starts (tens of seconds for
an `npx` server), or after a reload adds a server. The chat waits for those whose tools it may offer, up to
TOOLBRIDGE_MCP_START_WAIT, so that it has their tools; each still not ready then is named in the answer's trace
with why (trace.py), so that a model without those tools is not all the person hears. Only a server's state is
told, never its error, which may carry its stderr (the operator finds that in the log and /health).

Only a first start waits: a server that failed and is retried, or crashed and restarts, is past it (and may
stay so for minutes).
"""

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Protocol

import anyio
import structlog

from app.chat.ports import ToolSelection

log = structlog.get_logger("toolbridge.chat")

STARTING = "starting"
READY = "ready"
# What the person is told of a server the chat waited for; a server that waits for a sign-in is said otherwise
# (sign_in_notice.py).
_WHY = {STARTING: "is still starting", "failed": "failed to start (the gateway's operator can see why)",
        "restarting": "is restarting after a failure"}


class ServerStarts(Protocol):
    def server_states(self) -> Mapping[str, str]:
        """Each server's state, as /health names it."""
        ...

    def starting_for(self) -> Mapping[str, float]:
        """How long each server still in its first start has been starting, in seconds."""
        ...

    async def next_change(self) -> None:
        """Returns at the next change of a server's state or of the tools."""
        ...


@dataclass(frozen=True)
class NotReady:
    """A server a chat waited for that was not ready when it went on: its tools are missing from the answer."""

    server: str
    why: str


async def await_starting(servers: ServerStarts, selection: ToolSelection, seconds: float) -> list[NotReady]:
    """Waits for the servers still starting whose tools `selection` may offer, until each has been starting for
    `seconds` (counted from its start, not the chat's: an `npx` server that takes a minute delays the chats of its
    first `seconds` only); those of them not ready then, and why (none: nothing was starting, or all got ready)."""
    states = servers.server_states()
    waited = [name for name, state in states.items()
              if state == STARTING and _may_offer(name, selection, states.keys())]
    if not waited:  # the usual chat: the servers' ages are not asked for
        return []
    ages = servers.starting_for()
    left = max(seconds - ages.get(name, 0.0) for name in waited)
    if left > 0:
        log.info("chat_waits_for_mcp_servers", servers=waited, at_most_seconds=round(left, 1))
        with anyio.move_on_after(left):
            while any(servers.server_states().get(name) == STARTING for name in waited):
                await servers.next_change()
    states = servers.server_states()
    missing = [NotReady(name, _WHY[states[name]]) for name in waited if states.get(name) in _WHY]
    if missing:
        log.info("chat_goes_on_without_mcp_servers", servers={m.server: states[m.server] for m in missing})
    return missing


def _may_offer(server: str, selection: ToolSelection, servers: AbstractSet[str]) -> bool:
    """Whether the request may offer tools of this server: a choice that names servers alone rules out the others;
    one that names tools may hold one of this server's, which nobody knows before it has started."""
    return server not in selection.exclude and all(server in wanted or not wanted <= servers
                                                   for wanted in selection.include)
