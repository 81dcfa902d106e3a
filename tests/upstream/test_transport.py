"""The HTTP to the upstream: what the client learns of each request's time, and what a failed send becomes
(respx as transport; the aiohttp way out is driven through running gateways in test_broken_upstream.py); TLS only
for a model server on https, verified as httpx verifies it."""

from pathlib import Path

import httpx
import pytest
import respx

from app.openai.errors import UpstreamClosed, UpstreamError, UpstreamTimeout, UpstreamUnreachable
from app.upstream.transport import TlsOnFirstUse, UpstreamHttp, aiohttp_transport
from tests.support.fake_upstream import FakeUpstream, Turn
from tests.support.servers import ServerThread
from tests.support.tls import server_certificate

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


CHAT = b'{"model": "m", "messages": [{"role": "user", "content": "Hi."}]}'


async def _chat(base: str) -> tuple[int, TlsOnFirstUse]:
    """One chat and one pass-through request by the aiohttp transport (the default); the answer's status and the
    transport's TLS context."""
    transport = aiohttp_transport()
    upstream = UpstreamHttp(base, api_key=None, timeout=10.0, transport=transport, observe=None)
    try:
        answer = await upstream.post_chat(CHAT)
        await answer.read()
        await answer.aclose()
        await (await upstream.send(upstream.request("GET", "models", headers={}, content=None), "passthrough")).aclose()
    finally:
        await upstream.aclose()
    tls = getattr(transport, "ssl_context", None)
    assert isinstance(tls, TlsOnFirstUse)
    return answer.status, tls


@pytest.mark.anyio
async def test_a_model_server_on_http_never_makes_the_tls_context(upstream: FakeUpstream) -> None:
    """Made at start, its certificate authorities were 0.7 MB of an idle gateway's memory (issue 47)."""
    upstream.script(Turn(content="Hello."))
    status, tls = await _chat(f"{upstream.url}/v1")
    assert status == 200 and not tls.made


@pytest.mark.anyio
@pytest.mark.parametrize("trusted", [True, False], ids=["its authority trusted", "another authority's"])
async def test_a_model_server_on_https_is_verified_as_httpx_verifies_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trusted: bool,
) -> None:
    """The authorities httpx trusts (here SSL_CERT_FILE's, else certifi's), taken at the first connection: a
    certificate they signed is accepted, another refused."""
    authority, certificate, key = server_certificate(tmp_path, "ours")
    other, _, _ = server_certificate(tmp_path, "other")
    monkeypatch.setenv("SSL_CERT_FILE", str(authority if trusted else other))
    fake = FakeUpstream()
    fake.script(Turn(content="Hello."))
    with ServerThread(fake.app, ssl_certfile=str(certificate), ssl_keyfile=str(key)) as server:
        if trusted:
            status, tls = await _chat(f"{server.url}/v1")
            assert status == 200 and tls.made
        else:
            with pytest.raises(UpstreamUnreachable) as refused:
                await _chat(f"{server.url}/v1")
            assert "CERTIFICATE_VERIFY_FAILED" in repr(refused.value.__cause__)
        assert bool(fake.chat_requests()) is trusted
