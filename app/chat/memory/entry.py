"""What conversation memory keeps of a turn: its entry, encoded, bounded and read back.

An entry holds a turn's rounds (`before`: the assistant messages with `tool_calls` and the `tool` messages
with their results), its assistant message, what came after it (a mixed turn's own results), and the
messages of the MCP prompt its slash line ran, if any. It holds at most MAX_ENTRY_BYTES: past it the turn's
results are shortened to fit (with the envelope's own cut, handed in), the prompt is left out, and a turn that
still does not fit is not kept. Large entries are encoded and decoded in a worker thread, off the event loop.
An entry that does not decode is as good as none: the turn is then restored from its trace, if it has one.
"""

import json
from collections.abc import Callable, Sequence
from typing import Required, TypedDict, cast

import anyio.to_thread
import structlog

from app.chat.ports import InputNeeded
from app.openai.wire import Content, ContentPart, JSONObject, JSONValue, Message, ToolCallPart

log = structlog.get_logger("toolbridge.memory")

Shorten = Callable[[str, int], str]  # a result's text cut to at most so many characters

ENTRY_VERSION = 1
ANSWERED = b"1"  # under an answer's key: a turn with this text was stored
GATEWAY_REPLY = b"gateway"  # under a turn's key: the gateway answered the slash line before it itself
MAX_ENTRY_BYTES = 1024 * 1024  # one turn's calls and results as stored; results are shortened to fit
SHORTEST_RESULT_CHARS = 1000  # what a result shortened to fit an entry keeps at least
DECODE_INLINE_BYTES = 64 * 1024  # found entries past this size are decoded in a worker thread, off the loop


class StoredMessage(TypedDict, total=False):
    """A turn's assistant message as an entry keeps it: what the model wrote, laid over the message as the client
    sends it back (its role, and whatever else the client keeps)."""

    content: Content
    tool_calls: list[ToolCallPart]


class StoredInput(TypedDict):
    """A call's questions as a waiting entry keeps them (an `InputNeeded`)."""

    requests: dict[str, JSONObject]
    state: str | None


class Waiting(TypedDict, total=False):
    asks: Required[list[str]]  # the ids of the calls that wait for the yes (or an answer)
    at: Required[float]  # when it asked, seconds since the epoch
    continues: bool  # the turn only asks again: see `continues`
    inputs: dict[str, StoredInput]  # by call id: the calls that came back with the server's questions


class Entry(TypedDict, total=False):
    """A turn as memory keeps it."""

    v: Required[int]
    before: Required[list[Message]]  # its rounds: assistant messages with calls, and their `tool` results
    message: Required[StoredMessage]
    after: Required[list[Message]]  # a mixed turn's own results; a waiting turn's finished calls' results
    prompt: list[Message]  # the MCP prompt's messages its slash line ran
    waiting: Waiting  # its calls wait for the person


async def bounded_entry(before: list[Message], message: StoredMessage, after: list[Message],
                        prompt: Sequence[Message], shorten: Shorten,
                        waiting: Waiting | None = None) -> bytes | None:
    """The entry, within MAX_ENTRY_BYTES (its results shortened if need be), encoded in a worker thread
    when large: a turn's results may be megabytes. None when even shortened results do not fit (logged).
    A prompt that does not fit beside the calls (their results shortened) is left out: the slash line then
    stays as typed."""
    kept = _stored_prompt(prompt)
    tries = [kept] if kept else []
    if before or after or not kept:  # without its prompt, an entry is worth keeping for its calls only
        tries.append([])
    for with_prompt in tries:
        chars = rough_chars([*before, *after, *with_prompt]) + _chars(message.get("content"))
        if chars <= DECODE_INLINE_BYTES:  # a thread hop costs more
            entry = _within_entry_bound(before, message, after, shorten, with_prompt, waiting)
        else:
            entry = await anyio.to_thread.run_sync(_within_entry_bound, before, message, after, shorten,
                                                   with_prompt, waiting)
        if entry is not None:
            return entry
        if with_prompt:
            log.warning("prompt_not_remembered", reason="the prompt's messages take more than an entry may "
                        "hold", max_entry_bytes=MAX_ENTRY_BYTES)
    if before or after:
        log.warning("turn_not_remembered", reason="its calls take more than an entry may hold even with "
                    "their results shortened", max_entry_bytes=MAX_ENTRY_BYTES)
    return None


def _stored_prompt(prompt: Sequence[Message]) -> list[Message]:
    """A prompt's messages as an entry keeps them: images described, as a turn's tool images are not kept
    either (a picture would take the entry's room; the model saw it when the prompt ran)."""
    kept: list[Message] = []
    for message in prompt:
        content = message.get("content")
        if isinstance(content, list):
            content = [part if part.get("type") != "image_url" else _NOT_KEPT_IMAGE for part in content]
        kept.append({**message, "content": content})
    return kept


_NOT_KEPT_IMAGE: ContentPart = {"type": "text", "text": "[an image shown with the prompt, not kept]"}


def _encode(before: list[Message], message: StoredMessage, after: list[Message],
            prompt: list[Message], waiting: Waiting | None = None) -> bytes:
    entry: Entry = {"v": ENTRY_VERSION, "before": before, "message": message, "after": after}
    if prompt:  # optional, so that entries without one read the same in every version
        entry["prompt"] = prompt
    if waiting:  # the turn's calls wait for the person's yes (approvals.py): which ones, since when
        entry["waiting"] = waiting
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode()


def _within_entry_bound(before: list[Message], message: StoredMessage, after: list[Message],
                        shorten: Shorten, prompt: list[Message] | None = None,
                        waiting: Waiting | None = None) -> bytes | None:
    """The encoded entry if it fits MAX_ENTRY_BYTES; else with every result shortened to an equal share of
    the room (less until it fits, down to SHORTEST_RESULT_CHARS); else None."""
    prompt = prompt or []
    entry = _encode(before, message, after, prompt, waiting)
    results = {id(part): (part, content) for part in (*before, *after)
               if part.get("role") == "tool" and isinstance(content := part.get("content"), str)}
    if len(entry) <= MAX_ENTRY_BYTES or not results:
        return entry if len(entry) <= MAX_ENTRY_BYTES else None
    rest = len(entry) - sum(len(content.encode()) for _, content in results.values())
    limit = max(SHORTEST_RESULT_CHARS, (MAX_ENTRY_BYTES - rest) // len(results))
    while True:
        cut: dict[int, Message] = {key: {**part, "content": shorten(content, limit)}
                                   for key, (part, content) in results.items()}
        entry = _encode([cut.get(id(p), p) for p in before], message, [cut.get(id(p), p) for p in after], prompt,
                        waiting)
        if len(entry) <= MAX_ENTRY_BYTES:
            return entry
        if limit <= SHORTEST_RESULT_CHARS:
            return None
        # Results are escaped again inside the entry, so they take more than their length: cut in proportion.
        limit = max(SHORTEST_RESULT_CHARS, min(limit - 1, int(limit * 0.97 * MAX_ENTRY_BYTES / len(entry))))


def rough_chars(messages: Sequence[Message]) -> int:
    """About how many characters the messages' texts and call arguments take, without encoding them."""
    total = 0
    for message in messages:
        total += _chars(message.get("content"))
        for call in message.get("tool_calls") or []:
            total += _chars(call.get("function", {}).get("arguments"))
    return total


def _chars(value: object) -> int:
    """The characters of the strings in a value (a content's parts, a call's arguments), its lists and objects
    walked: writing it out with str() copied a 30 MB image's data URL on the event loop."""
    if isinstance(value, str):
        return len(value)
    total, pending = 0, [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            pending.extend(item.values())  # a content part's, or an image's URL
        elif isinstance(item, list):
            pending.extend(item)
        elif item is not None:
            total += len(str(item))
    return total


async def decode_all(found: dict[str, bytes]) -> dict[str, Entry]:
    """The entries that decode; in a worker thread when they are large, so a restore never stalls the loop."""
    def decode() -> dict[str, Entry]:
        return {key: entry for key, value in found.items() if (entry := _decode(value)) is not None}

    if sum(len(value) for value in found.values()) <= DECODE_INLINE_BYTES:
        return decode()
    return await anyio.to_thread.run_sync(decode)


def _decode(value: bytes | None) -> Entry | None:
    if value is None or value == ANSWERED:
        return None
    try:
        entry: JSONValue = json.loads(value)
    except ValueError:
        return None
    if not isinstance(entry, dict) or entry.get("v") != ENTRY_VERSION:
        return None
    if not (isinstance(entry.get("before"), list) and isinstance(entry.get("message"), dict)
            and isinstance(entry.get("after"), list)):
        return None
    prompt = entry.get("prompt")
    if prompt is not None and not (isinstance(prompt, list) and all(isinstance(m, dict) for m in prompt)):
        entry.pop("prompt")  # the turn's calls still stand; the slash line stays as typed
    if "waiting" in entry and _waiting_of(entry.get("waiting")) is None:
        return None  # a held call that cannot be read is never run
    # Only this gateway wrote it (the store's seal opens nothing else: app/state/seal.py), as `_encode` does, and
    # what a later reader relies on is checked above: an Entry.
    return cast(Entry, entry)


def inputs_of(entry: Entry) -> dict[str, InputNeeded]:
    """A waiting turn's calls that came back with the server's questions, by call id (none for approvals)."""
    inputs = entry.get("waiting", {}).get("inputs")
    if not isinstance(inputs, dict):
        return {}
    return {call_id: InputNeeded(needed["requests"], needed.get("state")) for call_id, needed in inputs.items()
            if isinstance(needed, dict) and isinstance(needed.get("requests"), dict)}


def continues(entry: Entry) -> bool:
    """A waiting turn that only asks the person again: calls of the waiting turn before it, taken up with the
    person's answers, came back with the server's next question (its `message` holds just those calls)."""
    return bool(entry.get("waiting", {}).get("continues"))


def waiting_of(entry: Entry) -> tuple[frozenset[str], float] | None:
    """A waiting turn's entry: the ids of the calls that wait for the yes, and when it asked; None for others."""
    return _waiting_of(entry.get("waiting"))


def _waiting_of(waiting: object) -> tuple[frozenset[str], float] | None:
    if not isinstance(waiting, dict):
        return None
    asks, asked_at = waiting.get("asks"), waiting.get("at")
    if not (isinstance(asks, list) and all(isinstance(a, str) for a in asks) and isinstance(asked_at, int | float)):
        return None
    return frozenset(asks), float(asked_at)
