"""Pass-through answers (models, embeddings, completions...) from a model server that dies mid-answer, through a
running gateway: the client always gets a whole HTTP response that says so in words. A JSON answer is a 502;
an event stream ends with the whole events that came, an error event and [DONE]."""

import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from app.upstream import relay
from tests.conftest import running_gateway
from tests.support.fake_upstream import FakeUpstream
from tests.support.servers import dying_upstream
from tests.upstream.test_broken_upstream import TIMEOUT, events, read_to_the_end

PIECE = {"id": "cmpl-1", "object": "text_completion", "model": "m", "choices": [{"index": 0, "text": "Once"}]}
WHOLE_EVENT = f"data: {json.dumps(PIECE)}\n\n".encode()
HALF_EVENT = b'data: {"id": "cmpl-1", "object": "text_com'
JSON_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n"
JSON_START = b'{"object": "list", "data": ['


@pytest.fixture(params=["aiohttp", "httpx"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize(
    ("data", "whole", "held"),
    [
        (b"", b"", b""),
        (b"data: 1\n\n", b"data: 1\n\n", b""),
        (b"data: 1\n\ndata: 2", b"data: 1\n\n", b"data: 2"),
        (b"data: 1\r\n\r\ndata: 2\r\n", b"data: 1\r\n\r\n", b"data: 2\r\n"),
        (b"data: 1\r\rdata: 2\n\ndata: 3", b"data: 1\r\rdata: 2\n\n", b"data: 3"),
        (b"data: 1\n", b"", b"data: 1\n"),
    ],
)
def test_events_are_passed_on_up_to_the_last_one_that_ended(data: bytes, whole: bytes, held: bytes) -> None:
    assert relay._split_after_last_event(data) == (whole, held)


def test_a_stream_cut_mid_event_ends_with_the_whole_events_an_error_and_done(tmp_path: Path, transport: str) -> None:
    with dying_upstream(WHOLE_EVENT + HALF_EVENT) as url, running_gateway(
        tmp_path, upstream_url=url, upstream_transport=transport
    ) as gateway:
        status, body = read_to_the_end(f"{gateway.url}/v1/completions", {"model": "m", "prompt": "hi", "stream": True})
    assert status == 200
    piece, error, done = events(body)
    assert piece == PIECE
    assert error["error"]["code"] == "upstream_cut_off"
    sent = len(WHOLE_EVENT + HALF_EVENT)
    assert f"the model server closed the connection after {sent} bytes of its response" in error["error"]["message"]
    assert done == "[DONE]"


def test_the_openai_sdk_reads_a_cut_completions_stream_in_words(tmp_path: Path) -> None:
    with dying_upstream(WHOLE_EVENT) as url, running_gateway(tmp_path, upstream_url=url) as gateway:
        texts = []
        with pytest.raises(openai.APIError, match="closed the connection after"):
            for chunk in gateway.client(timeout=TIMEOUT).completions.create(model="m", prompt="hi", stream=True):
                texts.append(chunk.choices[0].text)
    assert texts == ["Once"]


@pytest.mark.parametrize(("method", "path", "body"), [("POST", "/v1/embeddings", {"model": "m", "input": "hi"}),
                                                      ("GET", "/v1/models", None)])
def test_a_json_answer_cut_off_is_a_502_in_words(
    tmp_path: Path, transport: str, method: str, path: str, body: dict[str, Any] | None
) -> None:
    with dying_upstream(JSON_START, head=JSON_HEAD) as url, running_gateway(
        tmp_path, upstream_url=url, upstream_transport=transport
    ) as gateway:
        response = httpx.request(method, f"{gateway.url}{path}", json=body, timeout=TIMEOUT)
    assert response.status_code == 502
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("upstream_error", "upstream_cut_off")
    assert f"the model server closed the connection after {len(JSON_START)} bytes of its response" in error["message"]
    assert "<" not in error["message"] and "Error" not in error["message"]


def test_the_openai_sdk_gets_a_cut_embedding_as_a_502(tmp_path: Path) -> None:
    with (
        dying_upstream(JSON_START, head=JSON_HEAD) as url,
        running_gateway(tmp_path, upstream_url=url) as gateway,
        pytest.raises(openai.InternalServerError, match="closed the connection after") as caught,
    ):
        gateway.client(timeout=TIMEOUT).embeddings.create(model="m", input="hi")
    assert caught.value.status_code == 502


def test_a_body_past_the_whole_body_limit_still_arrives_whole(
    tmp_path: Path, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(relay, "WHOLE_BODY_LIMIT", 16)  # the gateway runs in this process
    with running_gateway(tmp_path, upstream_url=f"{upstream.url}/v1") as gateway:
        embedding = gateway.client().embeddings.create(model="embed", input="hello")
    assert embedding.data[0].embedding == [0.25, -0.5, 0.125]
