"""The stdio reader on its own: messages split and joined at any byte, and the bound on one message."""

from collections.abc import AsyncIterator

import pytest
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCError, JSONRPCResponse

from app.mcp.stdio import read_messages

pytestmark = pytest.mark.anyio

ANSWER = b'{"jsonrpc":"2.0","id":7,"result":{"text":"%s"}}\n'


async def _chunks(data: bytes, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start:start + size]


async def _read(data: bytes, size: int, max_bytes: int = 1 << 20) -> list[SessionMessage | Exception]:
    got: list[SessionMessage | Exception] = []

    async def deliver(message: SessionMessage | Exception) -> None:
        got.append(message)

    await read_messages(_chunks(data, size), deliver, max_bytes=max_bytes, server="s")
    return got


@pytest.mark.parametrize("size", [1, 2, 7, 64, 65536])
async def test_messages_come_whole_however_the_pipe_cuts_them(size: int) -> None:
    data = (ANSWER % b"a") + b"not json\n" + (ANSWER % "\u00e9\u4e2d".encode()) + b'{"jsonrpc":"2.0","method":"x"}\n'
    got = await _read(data, size)
    assert isinstance(got[0], SessionMessage) and isinstance(got[0].message, JSONRPCResponse)
    assert got[0].message.result == {"text": "a"}
    assert isinstance(got[1], ValueError)  # reported to the session, which reads on
    assert isinstance(got[2], SessionMessage) and got[2].message.result == {"text": "\u00e9\u4e2d"}
    assert isinstance(got[3], SessionMessage) and len(got) == 4


@pytest.mark.parametrize("size", [1000, 65536])
async def test_a_message_over_the_bound_becomes_the_error_answer_to_its_request(size: int) -> None:
    data = (ANSWER % (b"x" * 50_000)) + (ANSWER % b"after")
    got = await _read(data, size, max_bytes=10_000)
    assert isinstance(got[0], SessionMessage) and isinstance(got[0].message, JSONRPCError)
    assert got[0].message.id == 7 and "over 0.00953674 MiB" in got[0].message.error.message
    assert isinstance(got[1], SessionMessage) and got[1].message.result == {"text": "after"}


async def test_an_unanswerable_message_over_the_bound_is_dropped_with_a_reason() -> None:
    got = await _read(b'{"jsonrpc":"2.0","method":"notifications/message","params":"' + b"y" * 50_000 + b'"}\n', 4096,
                      max_bytes=10_000)
    assert len(got) == 1 and isinstance(got[0], ValueError) and "was dropped" in str(got[0])


async def test_bytes_that_are_not_utf8_become_replacement_characters() -> None:
    [message] = await _read(ANSWER % b"\xff\xfe", 3)
    assert isinstance(message, SessionMessage) and message.message.result == {"text": "\ufffd\ufffd"}
