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
from typing import Any

import anyio.to_thread
import structlog

from app.chat.ports import InputNeeded

log = structlog.get_logger("toolbridge.memory")

Shorten = Callable[[str, int], str]  # a result's text cut to at most so many characters

ENTRY_VERSION = 1
ANSWERED = b"1"  # under an answer's key: a turn with this text was stored
GATEWAY_REPLY = b"gateway"  # under a turn's key: the gateway answered the slash line before it itself
MAX_ENTRY_BYTES = 1024 * 1024  # one turn's calls and results as stored; results are shortened to fit
SHORTEST_RESULT_CHARS = 1000  # what a result shortened to fit an entry keeps at least
DECODE_INLINE_BYTES = 64 * 1024  # found entries past this size are decoded in a worker thread, off the loop


async def bounded_entry(before: list[dict[str, Any]], message: dict[str, Any], after: list[dict[str, Any]],
                        prompt: Sequence[dict[str, Any]], shorten: Shorten,
                        waiting: dict[str, Any] | None = None) -> bytes | None:
    """The entry, within MAX_ENTRY_BYTES (its results shortened if need be), encoded in a worker thread
    when large: a turn's results may be megabytes. None when even shortened results do not fit (logged).
    A prompt that does not fit beside the calls (their results shortened) is left out: the slash line then
    stays as typed."""
    kept = _stored_prompt(prompt)
    tries = [kept] if kept else []
    if before or after or not kept:  # without its prompt, an entry is worth keeping for its calls only
        tries.append([])
    for with_prompt in tries:
        parts = [*before, message, *after, *with_prompt]
        if rough_chars(parts) <= DECODE_INLINE_BYTES:  # a thread hop costs more
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


def _stored_prompt(prompt: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A prompt's messages as an entry keeps them: images described, as a turn's tool images are not kept
    either (a picture would take the entry's room; the model saw it when the prompt ran)."""
    kept = []
    for message in prompt:
        content = message.get("content")
        if isinstance(content, list):
            content = [part if part.get("type") != "image_url" else
                       {"type": "text", "text": "[an image shown with the prompt, not kept]"} for part in content]
        kept.append({**message, "content": content})
    return kept


def _encode(before: list[dict[str, Any]], message: dict[str, Any], after: list[dict[str, Any]],
            prompt: list[dict[str, Any]], waiting: dict[str, Any] | None = None) -> bytes:
    entry: dict[str, Any] = {"v": ENTRY_VERSION, "before": before, "message": message, "after": after}
    if prompt:  # optional, so that entries without one read the same in every version
        entry["prompt"] = prompt
    if waiting:  # the turn's calls wait for the person's yes (approvals.py): which ones, since when
        entry["waiting"] = waiting
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode()


def _within_entry_bound(before: list[dict[str, Any]], message: dict[str, Any], after: list[dict[str, Any]],
                        shorten: Shorten, prompt: list[dict[str, Any]] | None = None,
                        waiting: dict[str, Any] | None = None) -> bytes | None:
    """The encoded entry if it fits MAX_ENTRY_BYTES; else with every result shortened to an equal share of
    the room (less until it fits, down to SHORTEST_RESULT_CHARS); else None."""
    prompt = prompt or []
    entry = _encode(before, message, after, prompt, waiting)
    results = [part for part in (*before, *after)
               if part.get("role") == "tool" and isinstance(part.get("content"), str)]
    if len(entry) <= MAX_ENTRY_BYTES or not results:
        return entry if len(entry) <= MAX_ENTRY_BYTES else None
    rest = len(entry) - sum(len(part["content"].encode()) for part in results)
    limit = max(SHORTEST_RESULT_CHARS, (MAX_ENTRY_BYTES - rest) // len(results))
    while True:
        cut = {id(part): {**part, "content": shorten(part["content"], limit)} for part in results}
        entry = _encode([cut.get(id(p), p) for p in before], message, [cut.get(id(p), p) for p in after], prompt,
                        waiting)
        if len(entry) <= MAX_ENTRY_BYTES:
            return entry
        if limit <= SHORTEST_RESULT_CHARS:
            return None
        # Results are escaped again inside the entry, so they take more than their length: cut in proportion.
        limit = max(SHORTEST_RESULT_CHARS, min(limit - 1, int(limit * 0.97 * MAX_ENTRY_BYTES / len(entry))))


def rough_chars(messages: list[dict[str, Any]]) -> int:
    """About how many characters the messages' texts and call arguments take, without encoding them."""
    total = 0
    for message in messages:
        total += _chars(message.get("content"))
        for call in message.get("tool_calls") or []:
            total += _chars(call.get("function", {}).get("arguments") if isinstance(call, dict) else None)
    return total


def _chars(value: Any) -> int:
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
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        elif item is not None:
            total += len(str(item))
    return total


async def decode_all(found: dict[str, bytes]) -> dict[str, dict[str, Any]]:
    """The entries that decode; in a worker thread when they are large, so a restore never stalls the loop."""
    def decode() -> dict[str, dict[str, Any]]:
        return {key: entry for key, value in found.items() if (entry := _decode(value)) is not None}

    if sum(len(value) for value in found.values()) <= DECODE_INLINE_BYTES:
        return decode()
    return await anyio.to_thread.run_sync(decode)


def _decode(value: bytes | None) -> dict[str, Any] | None:
    if value is None or value == ANSWERED:
        return None
    try:
        entry = json.loads(value)
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
    if "waiting" in entry and waiting_of(entry) is None:
        return None  # a held call that cannot be read is never run
    return entry


def inputs_of(entry: dict[str, Any]) -> dict[str, InputNeeded]:
    """A waiting turn's calls that came back with the server's questions, by call id (none for approvals)."""
    inputs = (entry.get("waiting") or {}).get("inputs")
    if not isinstance(inputs, dict):
        return {}
    return {call_id: InputNeeded(needed["requests"], needed.get("state")) for call_id, needed in inputs.items()
            if isinstance(needed, dict) and isinstance(needed.get("requests"), dict)}


def continues(entry: dict[str, Any]) -> bool:
    """A waiting turn that only asks the person again: calls of the waiting turn before it, taken up with the
    person's answers, came back with the server's next question (its `message` holds just those calls)."""
    return bool((entry.get("waiting") or {}).get("continues"))


def waiting_of(entry: dict[str, Any]) -> tuple[frozenset[str], float] | None:
    """A waiting turn's entry: the ids of the calls that wait for the yes, and when it asked; None for others."""
    waiting = entry.get("waiting")
    if not isinstance(waiting, dict):
        return None
    asks, asked_at = waiting.get("asks"), waiting.get("at")
    if not (isinstance(asks, list) and all(isinstance(a, str) for a in asks) and isinstance(asked_at, int | float)):
        return None
    return frozenset(asks), float(asked_at)
