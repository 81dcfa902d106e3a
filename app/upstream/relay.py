"""A pass-through answer's body on its way to the client, ending the way clients understand when it breaks.

A client cannot tell a body that was cut short from a whole one once the gateway has ended it cleanly: a
JSON answer would be a 200 that does not parse, a stream one that just stops. So a body is read whole
before its head goes on, and a cut becomes a 502 in words; a stream of events goes on as it comes, in
whole events, and a cut becomes an error event and `[DONE]`. Only a body past WHOLE_BODY_LIMIT (a
download, never an API answer) is relayed as it comes without a word at a cut: its head is gone by then.
"""

from collections.abc import AsyncIterator

import orjson
import structlog

from app.upstream.failures import BROKEN_READ, Failure, amount

log = structlog.get_logger("toolbridge.upstream")

WHOLE_BODY_LIMIT = 64 * 1024 * 1024  # embeddings of a large batch come to tens of megabytes
_EVENT_ENDS = (b"\n\n", b"\r\n\r\n", b"\r\r")


async def read_whole(parts: AsyncIterator[bytes], failure: Failure) -> tuple[list[bytes], bool]:
    """The body's parts, and whether they are all of it (False: it passed WHOLE_BODY_LIMIT, and `parts`
    holds the rest).

    Raises:
        UpstreamError: the read broke off (`failure` says how).
    """
    read: list[bytes] = []
    size = 0
    try:
        async for part in parts:
            read.append(part)
            size += len(part)
            if size > WHOLE_BODY_LIMIT:
                return read, False
    except BROKEN_READ as exc:
        raise failure(exc, amount(size, "bytes of its response")) from exc
    return read, True


async def relay_rest(first: list[bytes], parts: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """A body past WHOLE_BODY_LIMIT: what was read, then the rest as it comes; a cut ends it, logged."""
    for part in first:
        yield part
    try:
        async for part in parts:
            yield part
    except BROKEN_READ as exc:
        log.warning("upstream_relay_broken", error=str(exc))


async def relay_events(parts: AsyncIterator[bytes], failure: Failure) -> AsyncIterator[bytes]:
    """A stream of server-sent events, a whole event at a time; a cut ends it with an error event and
    `[DONE]`, after the last whole event (half an event would fail the client's parser first)."""
    held = b""
    size = 0
    try:
        async for part in parts:
            size += len(part)
            whole, held = _split_after_last_event(held + part)
            if whole:
                yield whole
    except BROKEN_READ as exc:
        error = failure(exc, amount(size, "bytes of its response"))
        log.warning("upstream_relay_broken", error=error.message, code=error.code)
        yield b"data: " + orjson.dumps(error.envelope()) + b"\n\ndata: [DONE]\n\n"
        return
    if held:
        yield held  # the server ended its stream this way itself: pass it on as it is


def _split_after_last_event(data: bytes) -> tuple[bytes, bytes]:
    """`data` split after the last blank line that ends an event, whichever line ends the server uses."""
    end = max((data.rfind(mark) + len(mark) for mark in _EVENT_ENDS if mark in data), default=0)
    return data[:end], data[end:]
