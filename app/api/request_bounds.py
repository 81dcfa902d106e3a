"""What one request may carry, so that no body under TOOLBRIDGE_MAX_BODY_BYTES holds the event loop: its JSON
values, counted on its bytes before it is parsed; then its messages, their content parts and its tools, counted
before anything reads them one by one. Past a bound, a 400 names what and how much (audit S5: 200,000 messages
in 8 MB held /health 8 to 11 s on every door).

Parsing holds the GIL from the first byte to the last (orjson: 50-180 ns a value, 0.5 s for 50 MB of small
messages), in a worker thread as much as on the event loop, hence the values are counted first: at the bound,
a parse takes about 40 ms. The gateway then reads each message, part and tool several times on the event loop
(memory's keys, the tool budget, the upstream's body), a few microseconds each: the other bounds keep that to a
few milliseconds. None is near what a model's context holds: 10,000 messages fill a 128k context at 12 tokens
each, and OpenAI's own API takes 128 tools.

The values counted are a close upper bound on the array items and the values of object fields (keys are not
counted): each but the first of a container follows a comma, and the first follows the container's opening
bracket, so the commas and opening brackets outside strings, plus the body itself, bound them. Strings are told
apart exactly: once every escaped backslash and escaped quote is taken out, each quote left opens or closes one.
"""

from collections.abc import Iterator
from typing import Any

from app.openai.errors import InvalidRequest

MAX_VALUES = 250_000
MAX_MESSAGES = 10_000
MAX_PARTS = 20_000  # in all the messages: a client may send each message's text as a list of one part
MAX_TOOLS = 2_000
_SLICE = 1 << 20  # each slice's few passes hold the GIL for a few milliseconds; a thread lets the loop in between
_BACKSLASH = 0x5C


def check_values(body: bytes) -> None:
    """Raises InvalidRequest (`too_many_values`) when the body holds more than MAX_VALUES values."""
    if values_past(body, MAX_VALUES) is not None:
        raise InvalidRequest(
            f"The request body holds more than {MAX_VALUES:,} JSON values (array items and object fields); one "
            "request carries at most that many, more than any model's context holds. Send a shorter conversation.",
            code="too_many_values")


def check_carried(chat_body: dict[str, Any], field: str) -> None:
    """Raises InvalidRequest when a chat body holds more messages, content parts or tools than one request carries;
    `field` is what the client's door calls the conversation ("messages", or the Responses API's "input")."""
    messages = chat_body.get("messages")
    messages = messages if isinstance(messages, list) else []
    tools = chat_body.get("tools")
    parts = sum(len(content) for message in messages
                if isinstance(message, dict) and isinstance(content := message.get("content"), list))
    for count, bound, holds, what, param in (
        (len(messages), MAX_MESSAGES, "The conversation holds", "messages", field),
        (parts, MAX_PARTS, "The conversation's messages hold", "content parts", field),
        (len(tools) if isinstance(tools, list) else 0, MAX_TOOLS, "The request offers", "tools", "tools"),
    ):
        if count > bound:
            raise InvalidRequest(f"{holds} {count:,} {what}; one request carries at most {bound:,}, more than any "
                                 "model's context holds.", param=param, code=f"too_many_{what.split()[-1]}")


def values_past(body: bytes, bound: int) -> int | None:
    """How many values `body` holds (see above) when that is more than `bound`; None when it is not.

    Cheap for every body a client sends: one too short to hold more is not read at all, and one whose commas and
    brackets are few is read three times by C loops. Strings are skipped only in a body whose commas and brackets
    are many (a long paste of code or a table): then slice by slice, stopping once past the bound."""
    if len(body) < bound:
        return None
    if _structure(body) + 1 <= bound:
        return None
    count = 1
    inside = False  # whether the slice begins inside a string
    for piece in _slices(body):
        parts = piece.replace(b"\\\\", b"").replace(b'\\"', b"").split(b'"')
        count += _structure(b"".join(parts[1::2] if inside else parts[0::2]))
        if count > bound:
            return count
        inside ^= len(parts) % 2 == 0  # an odd number of quotes in the slice
    return None


def _structure(data: bytes) -> int:
    """The commas and opening brackets in `data`, counted a slice at a time (each count of 50 MB whole held the
    GIL for 12 ms)."""
    return sum(data.count(mark, start, start + _SLICE) for start in range(0, len(data), _SLICE)
               for mark in (b",", b"[", b"{"))


def _slices(body: bytes) -> Iterator[bytes]:
    """The body in slices of about _SLICE bytes, none ending inside an escape: a run of backslashes and the
    character after it stay in one slice."""
    start = 0
    while start < len(body):
        end = min(start + _SLICE, len(body))
        while end < len(body) and body[end - 1] == _BACKSLASH:
            end += 1
        yield body[start:end]
        start = end
