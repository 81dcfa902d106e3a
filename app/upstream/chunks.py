"""A chat completion's answer read into batches of chunks, the chunks that arrived in one read.

A stream of events ends with `[DONE]` or a finish_reason; one that ends with neither was cut off, and is
said to be rather than passed on as a finished answer. A server that ignored `stream: true` answers one
JSON completion: a turn of one chunk. A read that breaks says how much of the answer had arrived.

The server-sent events are split a network read at a time (`EventBatcher`). A model server writes a token per
event; read unpaced, one read of the socket holds hundreds of them. Handing on every event that arrived together
as one batch lets the gateway do its per-step work (fold, relay, write) once per read instead of once per token.
httpx-sse parses line by line and hands on one event at a time, which cost a third of the gateway's time on a
long stream (bench/compare.py).
"""

import json
from collections.abc import AsyncIterator, Iterator

import orjson

from app.openai.errors import UpstreamCutOff, UpstreamError, upstream_message
from app.openai.wire import JSONObject, JSONValue
from app.upstream.failures import BROKEN_READ, Failure, amount

# A read of an unpaced stream can hold a whole answer. Batches of 1, 2, 4... chunks get the first words to
# the client after a few chunks are decoded, not all of them, and still few writes for a long answer.
MAX_BATCH = 256


async def chunk_batches(
    content_type: str, parts: AsyncIterator[bytes], failure: Failure
) -> AsyncIterator[list[JSONObject]]:
    """The chunks of the answer whose body is `parts`, as dicts, in batches.

    Raises:
        UpstreamError: the stream carried an error event or what is not JSON, ended unfinished, or its read
            broke off (`failure` says how).
    """
    reading = _Reading(streamed=content_type.startswith("text/event-stream"))
    try:
        if not reading.streamed:
            yield [await reading.whole(parts)]
            return
        events = EventBatcher()
        async for data in parts:
            for batch in reading.batches(events.feed(data)):
                yield batch
            if reading.done:
                return
        if not reading.finished:
            # Neither [DONE] nor a finish_reason: the server died mid-answer. Passing that on as a
            # finished answer would hide that it is cut off.
            raise UpstreamCutOff("ended its stream unfinished", reading.arrived())
    except BROKEN_READ as exc:
        raise failure(exc, reading.arrived()) from exc


class _Reading:
    """One answer being read: how much has arrived (to say where it broke off) and how far the stream got."""

    def __init__(self, *, streamed: bool) -> None:
        self.streamed = streamed
        self.received = 0  # bytes of a whole JSON answer
        self.written = 0  # characters of a streamed answer: what its user saw arrive
        self.most = 1  # the first chunk goes on at once, then twice as many per batch up to MAX_BATCH
        self.finished = False  # a finish_reason came
        self.done = False  # [DONE] came

    def arrived(self) -> str:
        if self.streamed:
            return amount(self.written, "characters of the answer")
        return amount(self.received, "bytes of its answer")

    async def whole(self, parts: AsyncIterator[bytes]) -> JSONObject:
        """A JSON answer to a stream request, read whole: one chunk."""
        body = []
        async for data in parts:
            self.received += len(data)
            body.append(data)
        return decode(b"".join(body))

    def batches(self, events: list[bytes]) -> Iterator[list[JSONObject]]:
        """The chunks of the events of one read, in batches; stops at `[DONE]`."""
        batch: list[JSONObject] = []
        for event in events:
            if len(batch) >= self.most:
                yield batch
                batch, self.most = [], min(self.most * 2, MAX_BATCH)
            if event == b"[DONE]":
                self.done = True
                break
            if not event.strip():
                continue
            chunk = decode(event)
            if "error" in chunk and not chunk.get("choices"):
                raise UpstreamError(f"Upstream error: {upstream_message(chunk['error'])}")
            self.finished = self.finished or _has_finish_reason(chunk)
            self.written += _answer_characters(chunk)
            batch.append(chunk)
        if batch:
            yield batch


def decode(data: str | bytes) -> JSONObject:
    """One chunk.

    Raises:
        UpstreamError: it is not JSON, or not an object.
    """
    try:
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError:
        chunk = _decode_leniently(data)  # what orjson refuses and Python reads (NaN, -Infinity in logprobs)
    if not isinstance(chunk, dict):
        raise UpstreamError("The upstream sent a chunk that is not a JSON object")
    return chunk


def _decode_leniently(data: str | bytes) -> JSONValue:
    try:
        decoded: JSONValue = json.loads(data)
        return decoded
    except ValueError as exc:
        shown = data.decode(errors="replace") if isinstance(data, bytes) else data
        raise UpstreamError(f"The upstream sent something that is not JSON: {shown[:200]!r}") from exc


def _answer_characters(chunk: JSONObject) -> int:
    """The characters of answer text a chunk carries: content, reasoning and tool-call arguments (of its first
    choice: the only one the loop folds). Run on every chunk, so the usual one costs three lookups."""
    choices = chunk.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    delta = choice.get("delta") if isinstance(choice, dict) else None
    if not isinstance(delta, dict):
        return 0
    count = 0
    for text in (delta.get("content"), delta.get("reasoning_content") or delta.get("reasoning")):
        if isinstance(text, str):
            count += len(text)
    calls = delta.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        function = call.get("function") if isinstance(call, dict) else None
        arguments = function.get("arguments") if isinstance(function, dict) else None
        count += len(arguments) if isinstance(arguments, str) else 0
    return count


def _has_finish_reason(chunk: JSONObject) -> bool:
    choices = chunk.get("choices")
    return isinstance(choices, list) and any(isinstance(c, dict) and c.get("finish_reason") for c in choices)


# ---------------------------------------------------------------- server-sent events, a read at a time


class EventBatcher:
    """The `data` of each complete event in the bytes fed so far (SSE: events end with a blank line;
    `\\r\\n`, `\\r` and `\\n` all end a line; an event cut off when the stream ends is dropped)."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[bytes]:
        buffer = self._buffer + data
        if b"\r" in buffer:
            held = buffer.endswith(b"\r")  # may be the first half of \r\n: decide when the next read comes
            buffer = buffer[:-1] if held else buffer
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + (b"\r" if held else b"")
        *events, self._buffer = buffer.split(b"\n\n")
        found = []
        for event in events:
            if event.startswith(b"data:") and b"\n" not in event:  # the usual event: one data line
                found.append(_value(event))
                continue
            lines = [_value(line) for line in event.split(b"\n") if line.startswith(b"data:")]
            if lines:
                found.append(b"\n".join(lines))
        return found


def _value(data_line: bytes) -> bytes:
    """What follows `data:` on a line, less the one space that may come first."""
    return data_line[6:] if data_line[5:6] == b" " else data_line[5:]
