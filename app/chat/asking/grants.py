"""Grants (issue 48): what the person's answer decides beyond the call it answered. "yes for this chat", "yes for 1
hour", "always", "never" and "never for this chat" become a `Grant` of one API key, for one tool of one server, held
in the token vault (memory/grant_book.py) so that every replica reads it and a restart keeps it. Pure: which grant
decides a call, and how a grant is written down.

Which grant decides, when several cover a call: the narrowest scope (this chat, then a while, then always), and at
the same scope a no before a yes. A grant bound to a path (`under`) covers a call only when every path among its
arguments lies under it, and the call has one.
"""

import json
import posixpath
import secrets
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from app.chat.asking.approvals import Answer, Scope
from app.openai.wire import JSONValue

# Argument names that hold a path, beside values that read as one (`_paths`).
_PATH_NAMES = ("path", "file", "dir", "folder", "directory", "filename", "root", "source", "destination", "target")
_NARROWEST_FIRST = (Scope.CHAT, Scope.TIMED, Scope.ALWAYS)


@dataclass(frozen=True)
class Grant:
    """One answer that holds beyond its call: a yes (`allow`) or a no for `tool` of `server`."""

    id: str
    allow: bool
    server: str
    tool: str  # the server's own name for it, so a change of TOOLBRIDGE_TOOL_NAMES keeps it
    scope: Scope  # CHAT, TIMED or ALWAYS
    made: float
    expires: float | None = None  # TIMED's end
    under: str | None = None
    chats: tuple[str, ...] = ()  # CHAT's: the marks of the chat it was given in (memory/keys.py)
    reference: str = ""  # the question it answered ("Approval 3f9c2a1b")

    def alive(self, now: float) -> bool:
        return self.expires is None or now < self.expires

    def covers(self, server: str, tool: str, arguments: Mapping[str, JSONValue] | None, chats: Collection[str],
               now: float) -> bool:
        if (self.server, self.tool) != (server, tool) or not self.alive(now):
            return False
        if self.scope is Scope.CHAT and not any(chat in chats for chat in self.chats):
            return False
        return self.under is None or within(arguments, self.under)

    def as_json(self) -> dict[str, JSONValue]:
        return {"id": self.id, "allow": self.allow, "server": self.server, "tool": self.tool,
                "scope": self.scope.value, "made": self.made, "expires": self.expires, "under": self.under,
                "chats": list(self.chats), "reference": self.reference}

    def described(self) -> str:
        """What the grant says, in the words of the question's choices."""
        verb = "yes" if self.allow else "no"
        reach = {Scope.CHAT: "in one chat", Scope.ALWAYS: "until revoked"}.get(self.scope, "")
        if self.scope is Scope.TIMED and self.expires is not None:
            reach = f"until {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(self.expires))}"
        bound = f", for paths under {self.under}" if self.under else ""
        return f"{verb} to {self.tool} on {self.server} {reach}{bound}"


def grant_from_json(value: Any) -> Grant | None:
    """A grant as `as_json` wrote it; None for anything else (an older or damaged record is ignored)."""
    try:
        return Grant(str(value["id"]), bool(value["allow"]), str(value["server"]), str(value["tool"]),
                     Scope(value["scope"]), float(value["made"]),
                     None if value.get("expires") is None else float(value["expires"]),
                     None if value.get("under") is None else str(value["under"]),
                     tuple(str(chat) for chat in value.get("chats") or ()), str(value.get("reference") or ""))
    except (KeyError, TypeError, ValueError):
        return None


def grants_for(answer: Answer, calls: Iterable[tuple[str, str]], chats: Collection[str], reference: str,
               now: float) -> list[Grant]:
    """The grants an answer gives for the (server, tool) pairs it answered; none for an answer about this call
    only, or about this chat where the chat cannot be told (no marks)."""
    if answer.scope is Scope.CALL or (answer.scope is Scope.CHAT and not chats):
        return []
    expires = now + answer.seconds if answer.scope is Scope.TIMED and answer.seconds is not None else None
    return [Grant(secrets.token_hex(6), answer.allow, server, tool, answer.scope, now, expires, answer.under,
                  tuple(chats) if answer.scope is Scope.CHAT else (), reference)
            for server, tool in dict.fromkeys(calls)]


def decided_by(grants: Iterable[Grant], server: str, tool: str, arguments: str, chats: Collection[str],
               now: float) -> Grant | None:
    """The grant that decides a call (`Grant.allow`), or None: the person is asked."""
    parsed = parsed_arguments(arguments)
    covering = [grant for grant in grants if grant.covers(server, tool, parsed, chats, now)]
    for scope in _NARROWEST_FIRST:
        at_scope = [grant for grant in covering if grant.scope is scope]
        if at_scope:
            return min(at_scope, key=lambda grant: grant.allow)  # a no first
    return None


def within(arguments: Mapping[str, JSONValue] | None, under: str) -> bool:
    """Whether the call names at least one path and every path it names lies under `under` (".." resolved, so
    `/home/me/notes/../.ssh` is not under `/home/me/notes`)."""
    paths = list(_paths(arguments or {}))
    root = posixpath.normpath(under)
    return bool(paths) and all(
        (path := posixpath.normpath(value)) == root or path.startswith(root.rstrip("/") + "/") for value in paths)


def _paths(arguments: Mapping[str, JSONValue]) -> Iterable[str]:
    for name, value in arguments.items():
        values = value if isinstance(value, list) else [value]
        for item in values:
            if isinstance(item, str) and (any(part in name.lower() for part in _PATH_NAMES)
                                          or item.startswith(("/", "~", "./", "../"))):
                yield item


def parsed_arguments(arguments: str) -> dict[str, JSONValue] | None:
    """A call's arguments as the JSON object they should be; None for anything else."""
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None
