"""A mounted MCP server that waits for a person's sign-in (OAuth), in a chat: the model is told in one sentence
that its tools are unavailable for now (so that it neither pretends to have them nor retries), and the person is
shown the sign-in link once per chat, in a line of the answer the model never sees (`shown.py` removes it from
the history again).

"Once per chat" without a store: the link is not shown again while the history the client sends back has it in
an earlier assistant message. Once signed in, the server is ready: the next request offers its tools, and
neither the note nor the link is written any more. A server whose one sign-in is shared by every key, which
this key may not give (app/access/scope.py), gets no link: the person is told, once, that the gateway's
operator signs it in. Pure.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import quote

from app.chat.answer import SIGN_IN_MARK
from app.chat.ports import LoopOptions, SignInWaits
from app.openai.wire import Content, Message

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
