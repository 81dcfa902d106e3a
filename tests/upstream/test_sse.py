"""The upstream's server-sent events, split a network read at a time."""

import pytest

from app.upstream.chunks import EventBatcher


@pytest.mark.parametrize(
    ("reads", "events"),
    [
        ([b'data: {"a":1}\n\ndata: {"b":2}\n\n'], [[b'{"a":1}', b'{"b":2}']]),
        ([b"data: one\n\nda", b"ta: two\n\n"], [[b"one"], [b"two"]]),  # an event cut by a read
        ([b"data: one\n", b"\ndata: two\n\n"], [[], [b"one", b"two"]]),  # the blank line in the next read
        ([b"data: one\r\n\r\ndata: two\r", b"\n\r\n"], [[b"one"], [b"two"]]),  # \r\n cut between reads
        # bare \r ends lines too; a last \r waits for the next read, which may begin with \n
        ([b"data: one\r\rdata: two\r\r", b"data: x\r\r"], [[b"one"], [b"two"]]),
        ([b"data:tight\n\n"], [[b"tight"]]),  # the space after the colon is optional
        ([b"data: line 1\ndata: line 2\n\n"], [[b"line 1\nline 2"]]),  # lines of one event's data
        ([b": ping\n\nevent: message\nid: 7\ndata: x\n\n"], [[b"x"]]),  # comments and other fields
        ([b"data: [DONE]\n\n"], [[b"[DONE]"]]),
        ([b"data: cut off"], [[]]),  # an event the stream ends inside is never handed on
        ([b"\n\n\n\ndata: x\n\n"], [[b"x"]]),
    ],
)
def test_events_come_out_whole_and_in_batches_per_read(reads: list[bytes], events: list[list[bytes]]) -> None:
    batcher = EventBatcher()
    assert [batcher.feed(read) for read in reads] == events


def test_one_byte_at_a_time_gives_the_same_events() -> None:
    stream = b'data: {"a":1}\r\n\r\n: ping\n\ndata: two\ndata: lines\n\ndata: [DONE]\n\n'
    batcher = EventBatcher()
    found = [event for i in range(len(stream)) for event in batcher.feed(stream[i:i + 1])]
    assert found == [b'{"a":1}', b"two\nlines", b"[DONE]"]
