"""The HTTP to one upstream: its pooled client, sending, and transport failures in the gateway's errors.

One pooled `httpx.AsyncClient` per gateway; its transport can be swapped (tests inject respx or a faster
transport). Chat completions go straight on aiohttp's session when aiohttp is the transport, everything else
through httpx. Whichever way a request went, a transport failure becomes the gateway's UpstreamError tree
here (worded by app/upstream/failures.py), nowhere else.
"""

import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeVar

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

from app.openai.errors import UpstreamError
from app.upstream.failures import broken_read, failed_before_answer

# What may replace the default HTTP transport (respx in tests, a faster stack in production).
Transport = httpx.AsyncBaseTransport
# How long each chat or pass-through request took to its headers: observe(kind, seconds).
Observe = Callable[[str, float], None]
CONNECT_TIMEOUT = 10.0  # a local server either accepts at once or is not running
PROBE_TIMEOUT = 3.0
# The one pool to the upstream, whichever transport holds it.
LIMITS = httpx.Limits(max_connections=200, max_keepalive_connections=50)
# What a request may raise before its answer's head, from either transport.
_SEND_FAILED = (TimeoutError, aiohttp.ClientError, httpx.TransportError)
_T = TypeVar("_T")


def aiohttp_transport() -> Transport:
    """aiohttp under the httpx API: measured 2-3x less added latency per streamed turn than httpx's own
    transport on loopback (bench/compare.py), and it holds up better under concurrency (encode/httpx#3215)."""
    return _AiohttpTransport(limits=LIMITS, verify=TlsOnFirstUse())


class TlsOnFirstUse(ssl.SSLContext):
    """httpx's own TLS context (certifi's authorities, or SSL_CERT_FILE's or SSL_CERT_DIR's), made at the first TLS
    connection and wrapping that one and every later one. Made at start, its authorities were 0.7 MB of an idle
    gateway's memory that a model server on http:// (LM Studio's, the default) never uses (issue 47). A context
    itself, so that aiohttp and httpx take it where they take httpx's; nothing else of it is used."""

    _made: ssl.SSLContext | None = None

    def __new__(cls) -> "TlsOnFirstUse":
        return super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)

    @property
    def made(self) -> bool:
        return self._made is not None

    def _context(self) -> ssl.SSLContext:
        if self._made is None:
            self._made = httpx.create_ssl_context()
        return self._made

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        return self._context().wrap_bio(*args, **kwargs)

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        return self._context().wrap_socket(*args, **kwargs)


class _AiohttpTransport(AiohttpTransport):
    """httpx-aiohttp maps aiohttp's connection and timeout errors to httpx's, but lets a malformed
    response (a server that answers garbage) escape as aiohttp's own error: that too is a broken upstream.

    Chat requests skip the httpx layer and use its aiohttp session directly (`UpstreamHttp.post_chat`):
    building an httpx request and response around aiohttp's cost more per request than the rest of the
    upstream call (bench/compare.py)."""

    def session(self) -> aiohttp.ClientSession:
        if not isinstance(self.client, aiohttp.ClientSession):
            self.client = self.get_client()
        return self.client

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return await super().handle_async_request(request)
        except aiohttp.ClientError as exc:
            raise httpx.RemoteProtocolError(str(exc) or type(exc).__name__, request=request) from exc


class Answer(Protocol):
    """An answer whose head has arrived, from either transport; its body is still to be read."""

    @property
    def status(self) -> int: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def parts(self) -> AsyncIterator[bytes]: ...  # the body as it arrives, a network read at a time
    async def read(self) -> bytes: ...
    async def aclose(self) -> None: ...


class _AiohttpAnswer:
    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.status: int = response.status
        self.headers: Mapping[str, str] = response.headers
        self.parts: AsyncIterator[bytes] = response.content.iter_any()
        self._response = response

    async def read(self) -> bytes:
        return await self._response.read()

    async def aclose(self) -> None:
        self._response.release()


class _HttpxAnswer:
    def __init__(self, response: httpx.Response) -> None:
        self.status: int = response.status_code
        self.headers: Mapping[str, str] = response.headers
        self.parts: AsyncIterator[bytes] = response.aiter_bytes()
        self._response = response

    async def read(self) -> bytes:
        return await self._response.aread()

    async def aclose(self) -> None:
        await self._response.aclose()


class UpstreamHttp:
    """Requests to one OpenAI-compatible base URL (without its trailing slash) and the server's own
    endpoints beside it; close with `aclose`."""

    def __init__(
        self, base_url: str, *, api_key: str | None, timeout: float, transport: Transport | None,
        observe: Observe | None,
    ) -> None:
        self.base_url = base_url
        self.timeout = timeout
        self._observe = observe
        # LM Studio's and llama.cpp's own endpoints live beside /v1, not under it.
        self._root = (base_url.removesuffix("/v1") + "/") if base_url.endswith("/v1") else base_url + "/"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._aiohttp = transport if isinstance(transport, _AiohttpTransport) else None
        self._chat_url = f"{base_url}/chat/completions"
        self._chat_headers = {**headers, "Content-Type": "application/json"}
        self._chat_timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT, sock_read=timeout)
        self._client = httpx.AsyncClient(
            base_url=base_url + "/",
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=CONNECT_TIMEOUT),
            limits=LIMITS,
            transport=transport,
            verify=TlsOnFirstUse(),  # for httpx's own transport, when it is the one set
        )

    @property
    def api_url(self) -> httpx.URL:
        """The base URL, with the trailing slash requests are resolved against."""
        return self._client.base_url

    async def aclose(self) -> None:
        await self._client.aclose()

    def request(
        self, method: str, url: httpx.URL | str, *, headers: Mapping[str, str], content: AsyncIterator[bytes] | None
    ) -> httpx.Request:
        """A request to `send`: `url` below the base URL, `content` streamed (None sends no body)."""
        return self._client.build_request(method, url, headers=headers, content=content)

    async def post_chat(self, content: bytes) -> Answer:
        """POSTs a chat completion (`content`: its JSON body) and returns the answer once its head arrived.

        Raises:
            UpstreamUnreachable, UpstreamTimeout, UpstreamClosed: no answer came (`failed_before_answer`).
        """
        if self._aiohttp is not None:
            sending = self._aiohttp.session().post(
                self._chat_url, data=content, headers=self._chat_headers, timeout=self._chat_timeout,
                allow_redirects=False,
            )
            return _AiohttpAnswer(await self._answered("chat", sending))
        request = self._client.build_request(
            "POST", "chat/completions", content=content, headers={"content-type": "application/json"}
        )
        return _HttpxAnswer(await self.send(request, "chat"))

    async def send(self, request: httpx.Request, kind: str) -> httpx.Response:
        """Sends `request` (`kind` names it to `observe`) and returns the response once its head arrived,
        its body still streaming.

        Raises:
            UpstreamUnreachable, UpstreamTimeout, UpstreamClosed: no answer came (`failed_before_answer`).
        """
        return await self._answered(kind, self._client.send(request, stream=True))

    async def probe(self, path: str, *, beside: bool = True) -> httpx.Response | None:
        """A GET of one of the server's own endpoints beside /v1 (`path`, such as `props`), or with `beside`
        False of one below the base URL (`models`), read whole within PROBE_TIMEOUT; None when no answer came."""
        try:
            return await self._client.get(self._root + path if beside else path, timeout=PROBE_TIMEOUT)
        except _SEND_FAILED:
            return None

    def broken(self, exc: BaseException, received: str) -> UpstreamError:
        """What to raise when the read of an answer's body failed (`exc`, one of BROKEN_READ) after
        `received` ("12 characters of the answer") had arrived."""
        return broken_read(exc, self.base_url, self.timeout, received)

    async def _answered(self, kind: str, sending: Awaitable[_T]) -> _T:
        started = time.perf_counter()
        try:
            answer = await sending
        except _SEND_FAILED as exc:
            raise failed_before_answer(exc, self.base_url, self.timeout) from exc
        if self._observe is not None:
            self._observe(kind, time.perf_counter() - started)
        return answer
