"""The HTTP to the upstream: what the client learns of each request's time, and what a failed send becomes
(respx as transport; the aiohttp way out is driven through running gateways in test_broken_upstream.py)."""

import httpx
import pytest
import respx

from app.openai.errors import UpstreamClosed, UpstreamError, UpstreamTimeout, UpstreamUnreachable
from app.upstream.transport import UpstreamHttp

BASE = "http://upstream.test/v1"


def http(router: respx.MockRouter, seen: list[str] | None = None) -> UpstreamHttp:
    def observe(kind: str, seconds: float) -> None:
        assert seconds >= 0
        if seen is not None:
            seen.append(kind)

    return UpstreamHttp(BASE, api_key="sk-up", timeout=5.0, transport=httpx.MockTransport(router.handler),
                        observe=observe)


@pytest.mark.anyio
async def test_each_answered_request_is_observed_by_its_kind() -> None:
    router = respx.MockRouter(using=None)
    router.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(200, json={}))
    router.get(f"{BASE}/models").mock(return_value=httpx.Response(200, json={}))
    seen: list[str] = []
    upstream = http(router, seen)
    answer = await upstream.post_chat(b"{}")
    assert (answer.status, await answer.read()) == (200, b"{}")
    await answer.aclose()
    await (await upstream.send(upstream.request("GET", "models", headers={}, content=None), "passthrough")).aclose()
    await upstream.aclose()
    assert seen == ["chat", "passthrough"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("failure", "error"),
    [
        (httpx.ConnectError("refused"), UpstreamUnreachable),
        (httpx.ConnectTimeout("slow"), UpstreamUnreachable),
        (httpx.ReadTimeout("slow"), UpstreamTimeout),
        (httpx.RemoteProtocolError("Server disconnected without sending a response."), UpstreamClosed),
    ],
)
async def test_a_send_that_gets_no_answer_is_the_gateways_error(failure: Exception, error: type) -> None:
    router = respx.MockRouter(using=None)
    router.route().mock(side_effect=failure)
    seen: list[str] = []
    upstream = http(router, seen)
    with pytest.raises(error):
        await upstream.post_chat(b"{}")
    assert await upstream.probe("props") is None  # a probe unanswered is "cannot tell", not an error
    await upstream.aclose()
    assert seen == []


@pytest.mark.anyio
async def test_a_broken_read_says_how_much_had_arrived() -> None:
    upstream = http(respx.MockRouter(using=None))
    error = upstream.broken(httpx.ReadError("reset"), "12 characters of the answer")
    assert isinstance(error, UpstreamError) and "12 characters of the answer" in str(error)
    assert isinstance(upstream.broken(httpx.ReadTimeout("slow"), "0 bytes"), UpstreamTimeout)
    await upstream.aclose()
