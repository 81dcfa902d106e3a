"""An upstream that breaks, through a running gateway: what the client is told says in words what happened
(no aiohttp internals), and a server that closed the connection is not reported as one nobody runs."""

import contextlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Gateway, running_gateway
from tests.support.servers import raw_upstream

ASK = [{"role": "user", "content": "hi"}]
TIMEOUT = 30.0
FIRST = {"id": "x", "object": "chat.completion.chunk", "model": "m",
         "choices": [{"index": 0, "delta": {"content": "Hal"}, "finish_reason": None}]}
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
EVENT = f"data: {json.dumps(FIRST)}\n\n".encode()


def read_request(connection: socket.socket) -> None:
    """Reads one request whole: closing a socket with unread bytes resets the connection instead."""
    connection.settimeout(5)
    data = b""
    while b"\r\n\r\n" not in data:
        data += connection.recv(65536) or b"\r\n\r\n"
    head, _, body = data.partition(b"\r\n\r\n")
    lengths = [int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
    length = lengths[0] if lengths else 0
    while len(body) < length:
        body += connection.recv(65536) or b"x" * length


@pytest.fixture
def dropping_upstream() -> Iterator[str]:
    """Reads each request, then closes the connection without a word: a server that died on it."""

    def drop(connection: socket.socket) -> None:
        with contextlib.suppress(OSError):
            read_request(connection)
        connection.close()

    with raw_upstream(drop) as url:
        yield url


@pytest.fixture
def dying_upstream() -> Iterator[str]:
    """Starts a streamed answer (one chunk of a chunked body), then closes the connection mid-answer."""

    def die(connection: socket.socket) -> None:
        with contextlib.suppress(OSError):
            read_request(connection)
            connection.sendall(HEAD + f"{len(EVENT):x}\r\n".encode() + EVENT + b"\r\n")
        connection.close()

    with raw_upstream(die) as url:
        yield url


@pytest.fixture(params=["aiohttp", "httpx"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def chat(gateway: Gateway, stream: bool) -> tuple[int, list[str], dict[str, Any]]:
    """Status, the streamed texts, and the error (from the envelope or the stream's error event)."""
    body = {"model": "m", "messages": ASK, "stream": stream}
    with httpx.stream("POST", f"{gateway.url}/v1/chat/completions", json=body, timeout=TIMEOUT) as response:
        if response.status_code != 200 or not stream:
            response.read()
            return response.status_code, [], response.json().get("error") or {}
        texts, error = [], {}
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line.removeprefix("data: "))
            if "error" in event:
                error = event["error"]
            else:
                texts += [c["delta"].get("content") or "" for c in event.get("choices") or []]
        return 200, texts, error


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_an_upstream_that_closes_without_answering_is_not_called_unreachable(
    tmp_path: Path, dropping_upstream: str, transport: str, stream: bool
) -> None:
    with running_gateway(tmp_path, upstream_url=dropping_upstream, upstream_transport=transport) as gateway:
        status, _, error = chat(gateway, stream)
    assert status == 502
    assert error["type"] == "upstream_error" and error["code"] == "upstream_closed"
    assert "closed the connection without answering" in error["message"]
    assert dropping_upstream in error["message"]
    assert "Start Server" not in error["message"] and "Cannot reach" not in error["message"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_an_upstream_that_dies_mid_answer_is_said_in_words(
    tmp_path: Path, dying_upstream: str, transport: str, stream: bool
) -> None:
    with running_gateway(tmp_path, upstream_url=dying_upstream, upstream_transport=transport) as gateway:
        status, texts, error = chat(gateway, stream)
    assert (status, "".join(texts)) == ((200, "Hal") if stream else (502, ""))
    assert error["code"] == "upstream_cut_off"
    assert f"closed the connection after {len(EVENT)} bytes of its answer" in error["message"]
    assert "<" not in error["message"] and "Error" not in error["message"]  # no `<TransferEncodingError: ...>`
