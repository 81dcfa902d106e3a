"""The MCP servers whose tools a chat may lack: still starting, or waiting for a person's sign-in.

Starting: MCP servers still starting when a chat comes: the first seconds after the gateway starts (tens of seconds
for an `npx` server), or after a reload adds a server. The chat waits for those whose tools it may offer, up to
TOOLBRIDGE_MCP_START_WAIT, so that it has their tools; each still not ready then is named in the answer's trace
with why (trace.py), so that a model without those tools is not all the person hears. Only a server's state is
told, never its error, which may carry its stderr (the operator finds that in the log and /health).

Only a first start waits: a server that failed and is retried, or crashed and restarts, is past it (and may
stay so for minutes).

Waiting for a sign-in: a mounted MCP server that waits for a person's sign-in (OAuth), in a chat: the model is told in
one sentence that its tools are unavailable for now (so that it neither pretends to have them nor retries), and the
person is shown the sign-in link once per chat, in a line of the answer the model never sees (`strip_shown` removes it
from the history again).

"Once per chat" without a store: the link is not shown again while the history the client sends back has it in
an earlier assistant message. Once signed in, the server is ready: the next request offers its tools, and
neither the note nor the link is written any more. A server whose one sign-in is shared by every key, which
this key may not give (app/access/scope.py), gets no link: the person is told, once, that the gateway's
operator signs it in. Pure (the waiting for starts aside).
"""

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import quote

import anyio
import structlog

from app.chat.answer import SIGN_IN_MARK
from app.chat.ports import LoopOptions, SignInWaits, ToolSelection
from app.openai.wire import Content, Message

log = structlog.get_logger("toolbridge.chat")

STARTING = "starting"
READY = "ready"
# What the person is told of a server the chat waited for; a server that waits for a sign-in is said otherwise
# (below).
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


# Where a person signs in (app/api/sign_in_routes.py), under the gateway's base URL; behind the key, like /ui.
SIGN_IN_PATH = "/ui/servers/{name}/sign-in"


@dataclass(frozen=True)
class Waiting:
    """The servers a request mounts that wait for a sign-in: those the caller may give (`yours`: a link), and
    those only the gateway's operator may (`operators`)."""

    yours: list[str] = field(default_factory=list)
    operators: list[str] = field(default_factory=list)


def sign_in_notes(sign_ins: SignInWaits | None, options: LoopOptions, messages: Sequence[Message],
                  base_url: Callable[[], str]) -> tuple[str | None, str]:
    """What a request says of the servers it mounts that wait for a sign-in: the model's note (`model_note`) and
    the person's lines (`sign_in_lines`); None and "" when none waits, so that other requests are unchanged."""
    waiting = servers_waiting(sign_ins, options)
    note = model_note(waiting)
    if note is None:
        return None, ""
    return note, sign_in_lines(waiting, messages, base_url)


def servers_waiting(sign_ins: SignInWaits | None, options: LoopOptions) -> Waiting:
    """The caller's servers waiting for a sign-in that this request mounts: none when it offers no MCP tools
    (a background task), nor one its user switched off for this chat."""
    if sign_ins is None or not options.offer_tools:
        return Waiting()
    mounted = [name for name in sign_ins.servers_needing_sign_in() if options.tool_selection.admits_server(name)]
    return Waiting([name for name in mounted if sign_ins.may_sign_in(name)],
                   [name for name in mounted if not sign_ins.may_sign_in(name)])


def model_note(waiting: Waiting) -> str | None:
    """What the model is told: one sentence; None when no server waits, so that other requests are unchanged."""
    parts = []
    if waiting.yours:
        parts.append(f"{_named(waiting.yours)} are unavailable until the user signs in (they have been given a "
                     "sign-in link)")
    if waiting.operators:
        it = "it" if len(waiting.operators) == 1 else "them"
        parts.append(f"{_named(waiting.operators)} are unavailable until the gateway's operator signs in to {it} "
                     "(the user has been told)")
    if not parts:
        return None
    return f"The tools of {', and the tools of '.join(parts)}, so do not try to call them or make up their results."


def sign_in_lines(waiting: Waiting, messages: Sequence[Message], base_url: Callable[[], str]) -> str:
    """The lines the person is shown, one a server, for those no earlier answer of this chat has named so (its
    link, or that the operator signs it in); "" when there are none."""
    earlier = [text for message in messages if message.get("role") == "assistant"
               for text in _texts(message.get("content"))]
    links = [name for name in waiting.yours if not any(_path(name) in text for text in earlier)]
    told = [name for name in waiting.operators if not any(_operators(name) in text for text in earlier)]
    base = base_url().rstrip("/") if links else ""
    lines = [f"{SIGN_IN_MARK}To use {_plain(name)}'s tools, sign in: {base}{_path(name)}" for name in links]
    return "\n\n".join(lines + [f"{SIGN_IN_MARK}{_operators(name)}." for name in told])


def _named(servers: Sequence[str]) -> str:
    which = "server" if len(servers) == 1 else "servers"
    return f"the MCP {which} " + " and ".join(f"'{name}'" for name in servers)


def _operators(server: str) -> str:
    return f"{_plain(server)}'s tools wait for a sign-in that only the gateway's operator can give"


def _path(server: str) -> str:
    return SIGN_IN_PATH.format(name=quote(server, safe=""))


def _texts(content: Content) -> list[str]:
    """The text of a message's content: a string, or the text parts of a list."""
    if isinstance(content, str):
        return [content]
    return [text for part in content or () if isinstance(text := part.get("text"), str)]


def _plain(name: str) -> str:
    """A server's name safe in a line of markdown."""
    return "".join(c for c in name if c.isprintable() and c not in "[]()*_`<>")[:64]
