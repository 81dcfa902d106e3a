"""Server-sent events, a network read at a time.

A model server writes a token per event; read unpaced, one read of the socket holds hundreds of them.
Handing on every event that arrived together as one batch lets the gateway do its per-step work (fold,
relay, write) once per read instead of once per token. httpx-sse parses line by line and hands on one
event at a time, which cost a third of the gateway's time on a long stream (bench/compare.py).
"""


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
