"""Calls that wait for the person's yes: the question the person is asked, how their next message is read, and
what the model is told of calls that did not run. Pure: text in, text out.

Which tools ask first is the MCP side's (TOOLBRIDGE_CONFIRM, mcp.json's `confirm`); when a round calls one, the
loop ends the response with `question` and conversation memory keeps the round waiting. The person's next
message is read by `read_answer`: yes runs the calls, no gives the model `DECLINED` as their results, and anything
else is no with the message answered as usual. An answer may reach beyond its calls (`Scope`: for this chat, for a
while, always; grants.py keeps it), be bound to a path, and change the calls' arguments first.
The model never sees the question or the yes: only its calls and their results.
"""

import json
import re
import secrets
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from app.chat.clients import own_words
from app.openai.accumulate import ToolCall
from app.openai.wire import JSONValue


class Reply(Enum):
    YES = "yes"  # this call
    ALWAYS = "always"  # this call, and a grant beyond it: for this chat, for a while, or until revoked (`Answer`)
    NO = "no"  # not this call (and with a scope, not later ones either: "never")
    OTHER = "other"  # not an answer to the question: the calls do not run, the message is answered as usual


class Scope(Enum):
    """How far an answer reaches beyond the call it answers."""

    CALL = "call"  # this call only
    CHAT = "chat"  # this tool in this chat
    TIMED = "timed"  # this tool, for this key, for `Answer.seconds`
    ALWAYS = "always"  # this tool, for this key, until revoked on the status page


@dataclass(frozen=True)
class Answer:
    """The person's reply read as an answer: yes or no, how far it reaches, the paths it is bound to, and the
    arguments changed before the call runs ("yes, but path=notes/draft.md")."""

    allow: bool
    scope: Scope = Scope.CALL
    seconds: float | None = None  # Scope.TIMED's length
    under: str | None = None  # only calls whose path arguments all lie under this path
    edits: Mapping[str, JSONValue] = field(default_factory=dict)

    @property
    def reply(self) -> Reply:
        if not self.allow:
            return Reply.NO
        return Reply.YES if self.scope is Scope.CALL else Reply.ALWAYS


DECLINED = "The person declined this call; it was not run."
DECLINED_IN_ADVANCE = "The person declined calls of this tool in advance; this call was not run."
NOT_ANSWERED = "Not run: the person was asked to approve this call and answered with something else."
NOT_KEPT = "(No result of this call was kept.)"

# The words a reply may start with, after lower-casing and dropping punctuation.
_YES = frozenset({"yes", "y", "ok", "okay", "sure", "approve", "approved", "allow", "go ahead", "do it", "run it",
                  "yes please", "please do", "yep", "yeah", "confirm", "confirmed"})
_ALWAYS = frozenset({"always", "always allow", "yes always", "always yes", "allow always", "approve always"})
_NO = frozenset({"no", "n", "nope", "deny", "denied", "decline", "declined", "cancel", "stop", "dont", "don't",
                 "no thanks", "no thank you", "reject"})
_NEVER = frozenset({"never", "no never", "never allow", "deny always", "always deny", "no always"})
_LONGEST_WORDS = 40  # characters: a bare reply (no path, no changed argument) past this is a new message
_LONGEST_REPLY = 400  # characters: with paths and changed arguments
_PUNCTUATION = str.maketrans("", "", string.punctuation.replace("'", "") + "“”‘’!¡¿")
# Where a question of ours is recognised again in a history whose waiting turn is gone (another key, expired).
ASKING_MARK = "needs your approval"

_VERB = "|".join(sorted((re.escape(v) for v in _YES | _ALWAYS | _NO | _NEVER), key=len, reverse=True))
_UNITS = {"s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1, "m": 60, "min": 60, "mins": 60, "minute": 60,
          "minutes": 60, "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600, "d": 86_400,
          "day": 86_400, "days": 86_400, "w": 604_800, "week": 604_800, "weeks": 604_800}
_UNIT = "|".join(sorted(_UNITS, key=len, reverse=True))
_CHAT = r"(?:for|in)?\s*this\s+(?:chat|conversation)"
_SEP = r"[\s,;:.!-]*"
_ANSWER = re.compile(
    rf"^(?P<verb>{_VERB})(?![\w'])"
    rf"(?:{_SEP}(?P<chat>{_CHAT})|{_SEP}(?P<forever>for\s+good|forever|until\s+revoked|always|never)"
    rf"|{_SEP}(?:for\s+)?(?P<count>\d+(?:\.\d+)?|an?|one)\s*(?P<unit>{_UNIT})\b)?"
    rf"(?:{_SEP}(?:for\s+(?:[\w-]+\s+)?)?(?:under|within|inside)\s+(?P<under>[^\s,;]+))?"
    rf"(?:{_SEP}(?:but|with|using|and)\s+(?P<edits>\S.*?))?"
    rf"[\s.!]*$",
    re.IGNORECASE | re.DOTALL,
)
_EDIT = re.compile(r"^\s*(?P<name>[A-Za-z_][\w.-]*)\s*[=:]\s*(?P<value>\S.*?)\s*$", re.DOTALL)


def read_reply(text: str) -> Reply:
    """The person's message as an answer to the question: yes, yes beyond this call, no, or none of them; read past
    what their client wrapped around it (clients.py)."""
    answer = read_answer(text)
    return Reply.OTHER if answer is None else answer.reply


def read_answer(text: str) -> Answer | None:
    """The person's message read as an answer (`Answer`), or None when it is none: a yes, no, always or never,
    perhaps with how far it reaches (**for this chat**, **for 2 hours**, **for good**), a path it is bound to
    (**under /home/me/notes**) and arguments to change first (**but path=notes/draft.md**). Anything more is a new
    message: "yes, but first tell me what it does" is not a yes."""
    text = own_words(text).strip().strip("*_¡¿ ")
    if len(text) > 1 and text[0] in "\"“'‘" and text[-1] in "\"”'’":  # the whole reply quoted
        text = text[1:-1].strip()
    if len(text) > _LONGEST_REPLY:
        return None
    found = _ANSWER.match(text)
    if found is None:
        return None
    verb = " ".join(found["verb"].translate(_PUNCTUATION).lower().split())
    if (found["under"] is None and found["edits"] is None) and len(text) > _LONGEST_WORDS:
        return None
    edits = _edits(found["edits"]) if found["edits"] is not None else {}
    if edits is None:
        return None
    allow = verb not in _NO and verb not in _NEVER
    if not allow and edits:
        return None  # changed arguments for a call that does not run: not an answer we can act on
    scope, seconds = _scope(found, verb)
    if found["under"] is not None and scope is Scope.CALL:
        scope = Scope.CHAT  # a bound yes is meant to hold beyond this call: in this chat, unless it says longer
    return Answer(allow, scope, seconds, found["under"], edits)


def _scope(found: re.Match[str], verb: str) -> tuple[Scope, float | None]:
    if found["chat"] is not None:
        return Scope.CHAT, None
    if found["unit"] is not None:
        count = found["count"].lower()
        amount = 1.0 if count in ("a", "an", "one") else float(count)
        return Scope.TIMED, amount * _UNITS[found["unit"].lower()]
    if found["forever"] is not None or verb in _ALWAYS or verb in _NEVER:
        return Scope.ALWAYS, None
    return Scope.CALL, None


def _edits(text: str) -> dict[str, JSONValue] | None:
    """`name=value` pairs, split on commas and "and"; a value is JSON when it reads as JSON, else the text itself.
    None when any part is no such pair."""
    edits: dict[str, JSONValue] = {}
    for part in re.split(r",\s*(?=[A-Za-z_][\w.-]*\s*[=:])|\s+and\s+(?=[A-Za-z_][\w.-]*\s*[=:])", text):
        pair = _EDIT.match(part)
        if pair is None:
            return None
        raw = pair["value"]
        try:
            value: JSONValue = json.loads(raw)
        except ValueError:
            value = raw[1:-1] if len(raw) > 1 and raw[0] == raw[-1] and raw[0] in "'\"`" else raw
        edits[pair["name"]] = value
    return edits


@dataclass(frozen=True)
class AskedCall:
    """A call the person is asked about, as they are shown it."""

    call: ToolCall
    server: str | None
    changed: str | None = None  # how the server changed the tool's definition since it was pinned (a diff)


def question(asked: Sequence[AskedCall], reference: str) -> str:
    """The words that end the response: what the model wants to do, readably, and how to answer. `reference`
    names this question alone: two chats alike word for word still ask two questions, each answered once (the
    status page shows the same reference)."""
    one = len(asked) == 1
    lines = [f"The model wants to run {'a tool that' if one else f'{len(asked)} tools that each'} {ASKING_MARK}:", ""]
    for item in asked:
        where = f" on the server **{item.server}**" if item.server else ""
        lines.append(f"- **{item.call.name}**{where}{_arguments(item.call.arguments)}")
        if item.changed is not None:
            lines += ["  - **The server changed this tool's definition** since it was first trusted, so it asks "
                      "whatever was granted before, until an operator accepts the change on the status page:",
                      "", "    ```diff", *(f"    {line}" for line in item.changed.splitlines()), "    ```"]
    names = ", ".join(sorted({item.call.name for item in asked}))
    lines += ["", f"Reply **yes** to run {'it' if one else 'them'} or **no** to refuse. Beyond this call: **yes for "
              f"this chat**, **yes for 1 hour**, **always** or **never** for {names} (revoke on the status page); add "
              f"**under /a/path** to allow only paths there, or reply **yes, but name=value** to change an argument "
              f"first. (Approval {reference}.)"]
    return "\n".join(lines)


def new_reference() -> str:
    """A question's reference: short enough to read, random enough that two questions never share one."""
    return secrets.token_hex(4)


def _arguments(arguments: str) -> str:
    """The call's arguments, one per line, each value as JSON writes it and cut if long."""
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return f" with `{_cut(arguments)}`"
    if not isinstance(parsed, dict) or not parsed:
        return "" if parsed in ({}, None) else f" with `{_cut(json.dumps(parsed))}`"
    listed = "".join(f"\n  - {name}: `{_cut(json.dumps(value, ensure_ascii=False))}`" for name, value in parsed.items())
    return f", with{listed}"


def _cut(text: str, limit: int = 300) -> str:
    flat = text.replace("`", "'").replace("\n", " ")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def outside(under: str) -> str:
    """What the model is told of a call the person's yes did not reach: it was bound to paths under `under`."""
    return (f"Not run: the person approved only calls for paths under {under}, and this call names others. Call "
            "it again within that path, or the person will be asked again.")


def edited_note(edits: Mapping[str, JSONValue]) -> str:
    """Said before the result of a call whose arguments the person changed before approving it."""
    changed = ", ".join(f"{name}={json.dumps(value, ensure_ascii=False)}" for name, value in edits.items())
    return f"(The person changed the arguments before approving this call: {changed}.)"


def too_late(timeout_seconds: float) -> str:
    """What the model is told of a call whose yes came after TOOLBRIDGE_CONFIRM_TIMEOUT."""
    return (f"Not run: the person's yes came after the {timeout_seconds / 60:g} minutes a call waits for it. "
            "Call it again if it is still needed; the person will be asked again.")


def looks_like_question(text: str) -> bool:
    """Whether an assistant message reads like one of our questions (used only when no waiting turn was found)."""
    return ASKING_MARK in text and re.search(r"Reply \*\*yes\*\*", text) is not None


def no_longer_waiting() -> str:
    """The answer to a yes/no when nothing waits for it under this key (answered, expired, or never ours)."""
    return ("Nothing is waiting for your approval in this chat any more: it was answered already, it expired, or "
            "it was asked under another API key. Nothing was run. Ask again if you still want it done.")
