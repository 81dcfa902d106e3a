"""An upstream that breaks, through a running gateway: what the client is told says in words what happened
(no aiohttp internals), and a server that closed the connection is not reported as one nobody runs."""

import asyncio
import contextlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import openai
import pytest

from tests.conftest import Gateway, running_gateway
from tests.support.servers import dying_upstream as cut_upstream
from tests.support.servers import raw_upstream, read_request

ASK = [{"role": "user", "content": "hi"}]
TIMEOUT = 30.0
FIRST = {"id": "x", "object": "chat.completion.chunk", "model": "m",
         "choices": [{"index": 0, "delta": {"content": "Hal"}, "finish_reason": None}]}
EVENT = f"data: {json.dumps(FIRST)}\n\n".encode()
CUT_WORDS = "the model server closed the connection after 3 characters of the answer"  # "Hal"
JSON_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n"


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
    with cut_upstream(EVENT) as url:
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
    assert CUT_WORDS in error["message"]
    assert "<" not in error["message"] and "Error" not in error["message"]  # no `<TransferEncodingError: ...>`


def read_to_the_end(url: str, body: dict[str, Any]) -> tuple[int, bytes]:
    """What aiohttp (Open WebUI's client) reads of a response, to its very end: it raises where the gateway's
    own response is cut short (`Response payload is not completed`), so getting bytes back means it was not."""

    async def read() -> tuple[int, bytes]:
        async with aiohttp.ClientSession() as session, session.post(url, json=body) as response:
            return response.status, await response.read()

    return asyncio.run(asyncio.wait_for(read(), TIMEOUT))


def events(body: bytes) -> list[Any]:
    """The `data:` payloads of an event stream, JSON decoded ([DONE] as the string)."""
    lines = [line.removeprefix("data: ") for line in body.decode().split("\n") if line.startswith("data: ")]
    return [line if line == "[DONE]" else json.loads(line) for line in lines]


def test_a_stream_the_upstream_cuts_ends_with_its_error_and_done_for_a_raw_client(
    tmp_path: Path, dying_upstream: str, transport: str
) -> None:
    with running_gateway(tmp_path, upstream_url=dying_upstream, upstream_transport=transport) as gateway:
        status, body = read_to_the_end(f"{gateway.url}/v1/chat/completions",
                                       {"model": "m", "messages": ASK, "stream": True})
    assert status == 200
    *chunks, error, done = events(body)
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == "Hal"
    assert CUT_WORDS in error["error"]["message"] and error["error"]["code"] == "upstream_cut_off"
    assert done == "[DONE]"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_openai_sdk_reads_the_cut_off_in_words(tmp_path: Path, dying_upstream: str, stream: bool) -> None:
    with running_gateway(tmp_path, upstream_url=dying_upstream) as gateway:
        client = gateway.client(timeout=TIMEOUT)
        with pytest.raises(openai.APIError) as caught:
            if stream:
                for _chunk in client.chat.completions.create(model="m", messages=ASK, stream=True):  # type: ignore[arg-type]
                    pass
            else:
                client.chat.completions.create(model="m", messages=ASK)  # type: ignore[arg-type]
    assert CUT_WORDS in caught.value.message
    if not stream:
        assert isinstance(caught.value, openai.InternalServerError) and caught.value.status_code == 502


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_json_answer_the_upstream_cuts_is_said_in_bytes(tmp_path: Path, stream: bool) -> None:
    """A server that ignores `stream: true` and dies inside its JSON answer: no answer text was read."""
    with cut_upstream(b'{"id": "x", "choices": [', head=JSON_HEAD) as url, running_gateway(
        tmp_path, upstream_url=url
    ) as gateway:
        status, body = read_to_the_end(f"{gateway.url}/v1/chat/completions",
                                       {"model": "m", "messages": ASK, "stream": stream})
    error = events(body)[-2] if stream else json.loads(body)
    assert status == (200 if stream else 502)
    assert "closed the connection after 24 bytes of its answer" in error["error"]["message"]
