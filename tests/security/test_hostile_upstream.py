"""An upstream that answers garbage, cuts its stream off, or answers an error page: the client gets a 502 or an
error event in the OpenAI envelope, in words (never the page's markup), and a 429 keeps its Retry-After."""

import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.conftest import Gateway
from tests.security.conftest import gateway_at
from tests.support.fake_upstream import FakeUpstream, Turn
from tests.support.servers import raw_upstream

ASK = [{"role": "user", "content": "hi"}]


@pytest.fixture
def garbage_upstream() -> Iterator[str]:
    """Answers every request with bytes that are not HTTP."""

    def answer(connection: socket.socket) -> None:
        connection.settimeout(1)
        with contextlib.suppress(OSError):
            connection.recv(65536)
            connection.sendall(b"NOT HTTP AT ALL\r\n\r\n")

    with raw_upstream(answer) as url:
        yield url


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_an_upstream_that_answers_garbage_is_a_502(tmp_path: Path, garbage_upstream: str, transport: str) -> None:
    with gateway_at(tmp_path, garbage_upstream, upstream_transport=transport) as gateway:
        for response in (
            httpx.get(f"{gateway.url}/v1/models"),
            httpx.get(f"{gateway.url}/v1/models/x"),
            httpx.post(f"{gateway.url}/v1/chat/completions", json={"model": "m", "messages": ASK}),
        ):
            assert response.status_code == 502, response.text
            assert response.json()["error"]["type"] == "upstream_error"




def cut_off() -> Turn:
    piece = {"id": "x", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "Hal"}}]}
    return Turn(raw=[piece, piece], done=False)


def test_a_stream_the_upstream_cuts_off_ends_in_an_error_event(relay: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(cut_off())
    stream = relay.client().chat.completions.create(model="m", messages=ASK, stream=True)
    seen: list[str] = []
    with pytest.raises(openai.APIError, match="broke off"):
        for chunk in stream:
            assert chunk.choices[0].finish_reason is None
            seen.append(chunk.choices[0].delta.content or "")
    assert "".join(seen) == "HalHal"


def test_a_whole_answer_the_upstream_cuts_off_is_a_502(relay: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(cut_off())
    response = httpx.post(f"{relay.url}/v1/chat/completions", json={"model": "m", "messages": ASK})
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_cut_off"




def test_an_upstream_429_keeps_its_retry_after(relay: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(status=429, error="slow down", headers={"Retry-After": "7"}))
    with pytest.raises(openai.RateLimitError) as caught:
        relay.client().chat.completions.create(model="m", messages=ASK)
    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.body["message"] == "slow down"


def test_an_upstream_html_error_page_becomes_its_words(relay: Gateway, upstream: FakeUpstream) -> None:
    page = ("<html><head><title>502 Bad Gateway</title><style>body{}</style></head>"
            "<body><h1>Bad Gateway</h1><pre>/srv/app/secret/path.py</pre></body></html>")
    upstream.script(Turn(status=502, raw_body=page))
    response = httpx.post(f"{relay.url}/v1/chat/completions", json={"model": "m", "messages": ASK})
    assert response.status_code == 502
    assert response.json()["error"]["message"] == "Upstream error: 502 Bad Gateway"
