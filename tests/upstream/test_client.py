"""The upstream client against respx, injected as its transport: stream decoding and failure mapping."""

import json

import httpx
import pytest
import respx

from app.openai.errors import InvalidRequest, UpstreamError, UpstreamStatusError, UpstreamTimeout, UpstreamUnreachable
from app.upstream.client import UpstreamClient, _json_bytes

BASE = "http://upstream.test/v1"


def sse(*events: str) -> httpx.Response:
    body = "".join(f"data: {event}\n\n" for event in events)
    return httpx.Response(200, content=body.encode(), headers={"content-type": "text/event-stream"})


@pytest.fixture
def router() -> respx.MockRouter:
    return respx.MockRouter(using=None, assert_all_called=False)


async def collect(router: respx.MockRouter) -> list[dict]:
    client = UpstreamClient(BASE, api_key="sk-up", transport=httpx.MockTransport(router.handler))
    async with client, client.stream_chat({"model": "m", "messages": []}) as chunks:
        return [chunk async for batch in chunks for chunk in batch]


@pytest.mark.anyio
async def test_chunks_are_decoded_until_done(router: respx.MockRouter) -> None:
    route = router.post(f"{BASE}/chat/completions").mock(
        return_value=sse('{"choices": [{"delta": {"content": "a"}}]}', "[DONE]", '{"never": "read"}')
    )
    assert await collect(router) == [{"choices": [{"delta": {"content": "a"}}]}]
    assert route.calls.last.request.headers["authorization"] == "Bearer sk-up"


@pytest.mark.anyio
async def test_a_stream_with_a_finish_reason_but_no_done_ends_cleanly(router: respx.MockRouter) -> None:
    finished = '{"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}'
    router.post(f"{BASE}/chat/completions").mock(return_value=sse(finished))
    assert await collect(router) == [json.loads(finished)]


@pytest.mark.anyio
async def test_a_stream_with_neither_finish_reason_nor_done_is_cut_off(router: respx.MockRouter) -> None:
    router.post(f"{BASE}/chat/completions").mock(return_value=sse('{"choices": [{"delta": {"content": "Hal"}}]}'))
    with pytest.raises(UpstreamError, match="ended its stream unfinished after 3 characters of the answer"):
        await collect(router)


@pytest.mark.anyio
async def test_a_json_answer_to_a_stream_request_is_one_chunk(router: respx.MockRouter) -> None:
    router.post(f"{BASE}/chat/completions").mock(
        return_value=httpx.Response(200, json={"choices": [{"message": {"content": "whole"}}]})
    )
    assert await collect(router) == [{"choices": [{"message": {"content": "whole"}}]}]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("response", "error", "fragment"),
    [
        (sse('{"error": {"message": "out of memory"}}'), UpstreamError, "out of memory"),
        (sse("not json"), UpstreamError, "not JSON"),
        (httpx.Response(404, json={"error": {"message": "no such model"}}), UpstreamStatusError, "no such model"),
        (httpx.Response(500, text="boom"), UpstreamStatusError, "boom"),
    ],
)
async def test_failures_become_gateway_errors(
    router: respx.MockRouter, response: httpx.Response, error: type[Exception], fragment: str
) -> None:
    router.post(f"{BASE}/chat/completions").mock(return_value=response)
    with pytest.raises(error) as caught:
        await collect(router)
    assert fragment in str(caught.value)


@pytest.mark.anyio
async def test_status_errors_keep_4xx_and_turn_5xx_into_502(router: respx.MockRouter) -> None:
    router.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(429, json={"error": "slow down"}))
    with pytest.raises(UpstreamStatusError) as caught:
        await collect(router)
    assert caught.value.status_code == 429
    router.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(503, text="loading"))
    with pytest.raises(UpstreamStatusError) as caught:
        await collect(router)
    assert caught.value.status_code == 502


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("exception", "error"),
    [(httpx.ConnectError("refused"), UpstreamUnreachable), (httpx.ReadTimeout("slow"), UpstreamTimeout)],
)
async def test_transport_failures_are_named(
    router: respx.MockRouter, exception: Exception, error: type[Exception]
) -> None:
    router.post(f"{BASE}/chat/completions").mock(side_effect=exception)
    with pytest.raises(error) as caught:
        await collect(router)
    assert BASE in str(caught.value)


@pytest.mark.anyio
async def test_forward_strips_client_credentials_and_relays_the_body(router: respx.MockRouter) -> None:
    route = router.get(f"{BASE}/models").mock(return_value=httpx.Response(200, json={"data": []}))

    async def no_body():
        return
        yield b""

    async with UpstreamClient(BASE, transport=httpx.MockTransport(router.handler)) as client:
        proxied = await client.forward(
            "GET", "models", query="a=1", headers={"authorization": "Bearer client", "x-custom": "kept"},
            body=no_body(),
        )
        body = b"".join([part async for part in proxied.body])
    assert body == b'{"data":[]}'
    sent = route.calls.last.request
    assert "authorization" not in sent.headers
    assert sent.headers["x-custom"] == "kept"
    assert sent.url.query == b"a=1"


@pytest.mark.parametrize("body", [
    {"seed": 2**70, "n": -(2**63), "m": 2**64 - 1},
    {"messages": [{"role": "user", "content": "é"}], "extra": [[-(2**63) - 1, {"deep": [2**64]}], 1.5, True, None]},
    {"seed": 10**4000, "text": "\u2028\u0000\""},  # the longest integer a client's JSON may carry
], ids=["edges", "nested", "longest"])
def test_integers_past_64_bits_are_written_as_sent(body: dict) -> None:
    """orjson writes no integer past 64 bits, which a client's JSON may carry (a seed): they are written as their
    digits, the rest by orjson as always."""
    assert json.loads(_json_bytes(body)) == body


@pytest.mark.parametrize("body", [
    {"messages": [{"role": "user", "content": "hi \ud800"}]},
    {"seed": 2**70, "messages": [{"role": "user", "content": "\udfff"}]},
], ids=["surrogate", "surrogate-after-a-long-integer"])
def test_a_lone_surrogate_is_the_client_s_error(body: dict) -> None:
    with pytest.raises(InvalidRequest) as refused:
        _json_bytes(body)
    assert refused.value.code == "invalid_unicode"
