"""Calls that wait for the person's yes: the question the person is asked, how their next message is read, and
what the model is told of calls that did not run. Pure: text in, text out.

Which tools ask first is the MCP side's (TOOLBRIDGE_CONFIRM, mcp.json's `confirm`); when a round calls one, the
loop ends the response with `question` and conversation memory keeps the round waiting. The person's next
message is read by `read_reply`: yes runs the calls, always also stops asking about those tools in this chat,
no gives the model `DECLINED` as their results, and anything else is no with the message answered as usual.
The model never sees the question or the yes: only its calls and their results.
"""

import json
import re
import secrets
import string
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from app.chat.clients import own_words
from app.openai.accumulate import ToolCall


class Reply(Enum):
    YES = "yes"
    ALWAYS = "always"
    NO = "no"
    OTHER = "other"  # not an answer to the question: the calls do not run, the message is answered as usual


DECLINED = "The person declined this call; it was not run."
NOT_ANSWERED = "Not run: the person was asked to approve this call and answered with something else."
NOT_KEPT = "(No result of this call was kept.)"

# The words a reply may be, after lower-casing and dropping punctuation; a longer message is never an answer.
_YES = frozenset({"yes", "y", "ok", "okay", "sure", "approve", "approved", "allow", "go ahead", "do it", "run it",
                  "yes please", "please do", "yep", "yeah", "confirm", "confirmed"})
_ALWAYS = frozenset({"always", "always allow", "yes always", "always yes", "allow always", "approve always"})
_NO = frozenset({"no", "n", "nope", "deny", "denied", "decline", "declined", "cancel", "stop", "dont", "don't",
                 "no thanks", "no thank you", "reject"})
_LONGEST_REPLY = 40  # characters: a reply past this is a new message, whatever words it starts with
_PUNCTUATION = str.maketrans("", "", string.punctuation.replace("'", "") + "“”‘’!¡¿")
# Where a question of ours is recognised again in a history whose waiting turn is gone (another key, expired).
ASKING_MARK = "needs your approval"


def read_reply(text: str) -> Reply:
    """The person's message as an answer to the question: yes, always, no, or none of them; read past what their
    client wrapped around it (clients.py)."""
    text = own_words(text)
    if len(text) > _LONGEST_REPLY:
        return Reply.OTHER
    words = " ".join(text.translate(_PUNCTUATION).lower().split())
    if words in _ALWAYS:
        return Reply.ALWAYS
    if words in _YES:
        return Reply.YES
    if words in _NO:
        return Reply.NO
    return Reply.OTHER


@dataclass(frozen=True)
class AskedCall:
    """A call the person is asked about, as they are shown it."""

    call: ToolCall
    server: str | None


def question(asked: Sequence[AskedCall], reference: str) -> str:
    """The words that end the response: what the model wants to do, readably, and how to answer. `reference`
    names this question alone: two chats alike word for word still ask two questions, each answered once (the
    status page shows the same reference)."""
    one = len(asked) == 1
    lines = [f"The model wants to run {'a tool that' if one else f'{len(asked)} tools that each'} {ASKING_MARK}:", ""]
    for item in asked:
        where = f" on the server **{item.server}**" if item.server else ""
        lines.append(f"- **{item.call.name}**{where}{_arguments(item.call.arguments)}")
    names = ", ".join(sorted({item.call.name for item in asked}))
    lines += ["", f"Reply **yes** to run {'it' if one else 'them'}, **no** to refuse, or **always** to run {names} "
              f"without asking again in this chat. (Approval {reference}.)"]
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
