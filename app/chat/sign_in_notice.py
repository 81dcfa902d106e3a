"""A mounted MCP server that waits for a person's sign-in (OAuth), in a chat: the model is told in one sentence
that its tools are unavailable for now (so that it neither pretends to have them nor retries), and the person is
shown the sign-in link once per chat, in a line of the answer the model never sees (`shown.py` removes it from
the history again).

"Once per chat" without a store: the link is not shown again while the history the client sends back has it in
an earlier assistant message. Once signed in, the server is ready: the next request offers its tools, and
neither the note nor the link is written any more. Pure.
"""

from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote

from app.chat.ports import LoopOptions, SignInWaits
from app.chat.shown import SIGN_IN_MARK

# Where a person signs in (app/api/sign_in_routes.py), under the gateway's base URL; behind the key, like /ui.
SIGN_IN_PATH = "/ui/servers/{name}/sign-in"


def servers_waiting(sign_ins: SignInWaits | None, options: LoopOptions) -> list[str]:
    """The caller's servers waiting for a sign-in that this request mounts: none when it offers no MCP tools
    (a background task), nor one its user switched off for this chat."""
    if sign_ins is None or not options.offer_tools:
        return []
    return [name for name in sign_ins.servers_needing_sign_in() if options.tool_selection.admits(name, name)]


def model_note(servers: Sequence[str]) -> str | None:
    """What the model is told: one sentence; None when no server waits, so that other requests are unchanged."""
    if not servers:
        return None
    named = " and ".join(f"'{name}'" for name in servers)
    which = "server" if len(servers) == 1 else "servers"
    return (f"The tools of the MCP {which} {named} are unavailable until the user signs in (they have been "
            "given a sign-in link), so do not try to call them or make up their results.")


def sign_in_lines(servers: Sequence[str], messages: Sequence[dict[str, Any]], base_url: Callable[[], str]) -> str:
    """The lines the person is shown, one a server, for those whose link no earlier answer of this chat has;
    "" when there are none."""
    earlier = [text for message in messages if message.get("role") == "assistant"
               for text in _texts(message.get("content"))]
    new = [name for name in servers if not any(_path(name) in text for text in earlier)]
    if not new:
        return ""
    base = base_url().rstrip("/")
    return "\n\n".join(f"{SIGN_IN_MARK}To use {_plain(name)}'s tools, sign in: {base}{_path(name)}" for name in new)


def _path(server: str) -> str:
    return SIGN_IN_PATH.format(name=quote(server, safe=""))


def _texts(content: Any) -> list[str]:
    """The text of a message's content: a string, or the text parts of a list."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)]
    return []


def _plain(name: str) -> str:
    """A server's name safe in a line of markdown."""
    return "".join(c for c in name if c.isprintable() and c not in "[]()*_`<>")[:64]
