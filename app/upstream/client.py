"""The only module that speaks HTTP to the upstream model server.

One pooled `httpx.AsyncClient` per gateway. Its transport can be swapped (tests inject respx or a
faster transport). Transport failures become the gateway's UpstreamError tree here, nowhere else.
"""

import json
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Self

import aiohttp
import httpx
import orjson
import structlog
from httpx_aiohttp import AiohttpTransport

from app.openai.errors import InvalidRequest, UpstreamCutOff, UpstreamError, UpstreamStatusError, upstream_message
from app.openai.schemas import rewrite_model_list
from app.settings.vocabularies import TransportKind
from app.upstream.failures import BROKEN_READ, amount, broken_read, failed_before_answer
from app.upstream.paths import relative_path, without_credentials
from app.upstream.relay import read_whole, relay_events, relay_rest
from app.upstream.sse import EventBatcher

log = structlog.get_logger("toolbridge.upstream")

# Headers that describe one hop, or carry the client's identity, never go on to the upstream. The body's
# length is the client's only when its body is forwarded (see `forward`).
_REQUEST_HEADERS_DROPPED = frozenset(
    {"host", "authorization", "connection", "keep-alive", "te", "trailer", "upgrade",
     "proxy-authorization", "proxy-connection", "transfer-encoding", "accept-encoding", "cookie",
     "x-api-key", "api-key", "content-length"}
)
_RESPONSE_HEADERS_DROPPED = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "server", "date"}
)
# What may replace the default HTTP transport (respx in tests, a faster stack in production).
Transport = httpx.AsyncBaseTransport
CONNECT_TIMEOUT = 10.0  # a local server either accepts at once or is not running
PROBE_TIMEOUT = 3.0
# A read of an unpaced stream can hold a whole answer. Batches of 1, 2, 4... chunks get the first words to
# the client after a few chunks are decoded, not all of them, and still few writes for a long answer.
MAX_BATCH = 256
CAPABILITY_TTL = 60.0  # models get loaded and unloaded; ask again after this many seconds
ServerKind = Literal["lmstudio", "llamacpp", "openai-compatible", "unreachable"]


def make_transport(kind: TransportKind) -> Transport | None:
    """aiohttp under the httpx API: measured 2-3x less added latency per streamed turn than httpx's own
    transport on loopback (bench/compare.py), and it holds up better under concurrency (encode/httpx#3215).
    `None` means httpx's own transport."""
    if kind == "aiohttp":
        return _AiohttpTransport(limits=httpx.Limits(max_connections=200, max_keepalive_connections=50))
    return None


class _AiohttpTransport(AiohttpTransport):
    """httpx-aiohttp maps aiohttp's connection and timeout errors to httpx's, but lets a malformed
    response (a server that answers garbage) escape as aiohttp's own error: that too is a broken upstream.

    Chat requests skip the httpx layer and use its aiohttp session directly (`UpstreamClient.stream_chat`):
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


@dataclass
class ProxiedResponse:
    """An upstream answer on its way to the client: a stream of events as it arrives, any other body read
    whole first (app/upstream/relay.py); call `aclose` when done."""

    status_code: int
    headers: dict[str, str]
    body: AsyncIterator[bytes]
    _response: httpx.Response

    async def aclose(self) -> None:
        await self._response.aclose()


class UpstreamClient:
    """Chat completions and pass-through requests to one OpenAI-compatible base URL."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = 600.0,
        transport: Transport | None = None,
        observe: Callable[[str, float], None] | None = None,
    ) -> None:
        """`observe(kind, seconds)` learns how long each chat or pass-through request took to its headers."""
        self.base_url = base_url.rstrip("/")
        self._observe = observe
        self.timeout = timeout
        # LM Studio's and llama.cpp's own endpoints live beside /v1, not under it.
        self._root = (self.base_url.removesuffix("/v1") + "/") if self.base_url.endswith("/v1") else self.base_url + "/"
        self._kind: tuple[ServerKind, float] | None = None
        self._models: tuple[list[_ModelInfo], float] | None = None
        self._props_context: tuple[int | None, float] | None = None
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._aiohttp = transport if isinstance(transport, _AiohttpTransport) else None
        self._chat_url = f"{self.base_url}/chat/completions"
        self._chat_headers = {**headers, "Content-Type": "application/json"}
        self._chat_timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT, sock_read=timeout)
        self._http = httpx.AsyncClient(
            base_url=self.base_url + "/",
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=CONNECT_TIMEOUT),
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
            transport=transport,
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._http.aclose()

    @asynccontextmanager
    async def stream_chat(self, body: dict[str, Any]) -> AsyncIterator[AsyncIterator[list[dict[str, Any]]]]:
        """Opens a streamed chat completion and yields its chunks as dicts, in batches: the chunks that
        arrived in one read.

        Raises:
            InvalidRequest: the body holds what JSON cannot carry (NaN, a lone surrogate); nothing is sent.
            UpstreamUnreachable, UpstreamTimeout, UpstreamStatusError: before any chunk is yielded.
            UpstreamError: when the stream breaks or carries an error event.
        """
        content = _json_bytes(body)
        if self._aiohttp is not None:
            answer = await self._post_chat(self._aiohttp.session(), content)
            try:
                if answer.status >= 400:
                    raise UpstreamStatusError(answer.status, await answer.read(),
                                              retry_after=answer.headers.get("retry-after"))
                yield self._chunks(answer.headers.get("content-type", ""), answer.content.iter_any())
            finally:
                answer.release()
            return
        request = self._http.build_request(
            "POST", "chat/completions", content=content, headers={"content-type": "application/json"}
        )
        response = await self._send(request, "chat")
        try:
            if response.status_code >= 400:
                raise UpstreamStatusError(
                    response.status_code, await response.aread(), retry_after=response.headers.get("retry-after")
                )
            yield self._chunks(response.headers.get("content-type", ""), response.aiter_bytes())
        finally:
            await response.aclose()

    async def _post_chat(self, session: aiohttp.ClientSession, content: bytes) -> aiohttp.ClientResponse:
        started = time.perf_counter()
        try:
            answer = await session.post(self._chat_url, data=content, headers=self._chat_headers,
                                        timeout=self._chat_timeout, allow_redirects=False)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise failed_before_answer(exc, self.base_url, self.timeout) from exc
        if self._observe is not None:
            self._observe("chat", time.perf_counter() - started)
        return answer

    async def forward(
        self, method: str, path: str, *, query: str, headers: Mapping[str, str], body: AsyncIterator[bytes] | None
    ) -> ProxiedResponse:
        """Relays any other request (models, embeddings, completions), streaming both ways.

        `path` is the raw (still percent-encoded) path below the base URL. It can only ever name a path
        under the base URL: the upstream key goes with every request. `body` None sends none, whatever
        length the client declared.

        Raises:
            InvalidRequest: a path that would leave the base URL, or that no server could be sent.
        """
        url = self._url_below_base(relative_path(path), without_credentials(query))
        sent_headers = {k: v for k, v in headers.items() if k.lower() not in _REQUEST_HEADERS_DROPPED}
        # A request without a body (every GET) is sent without one: an empty chunked body on a GET is
        # read by strict servers as the start of the next request on the connection.
        has_body = body is not None and (
            "transfer-encoding" in headers or headers.get("content-length", "0") not in ("", "0")
        )
        if has_body and "content-length" in headers:
            sent_headers["content-length"] = headers["content-length"]
        request = self._http.build_request(method, url, headers=sent_headers, content=body if has_body else None)
        response = await self._send(request, "passthrough")
        kept = {k: v for k, v in response.headers.items() if k.lower() not in _RESPONSE_HEADERS_DROPPED}
        return ProxiedResponse(response.status_code, kept, await self._body(response), response)

    async def _body(self, response: httpx.Response) -> AsyncIterator[bytes]:
        """A pass-through answer's body: events as they come, anything else read whole first, so that a cut is
        said in words (app/upstream/relay.py).

        Raises:
            UpstreamError: a body read whole broke off (a 502 in words) or stalled (a 504).
        """
        def failure(exc: BaseException, received: str) -> UpstreamError:
            return broken_read(exc, self.base_url, self.timeout, received)

        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return relay_events(response.aiter_bytes(), failure)
        parts = response.aiter_bytes()
        try:
            read, whole = await read_whole(parts, failure)
        except UpstreamError:
            await response.aclose()
            raise
        return relay_rest(read, _nothing() if whole else parts)

    def _url_below_base(self, path: str, query: str) -> httpx.URL:
        try:
            url = httpx.URL(f"{self.base_url}/{path}", query=query.encode())
        except httpx.InvalidURL as exc:
            raise InvalidRequest(f"The path cannot be sent on: {exc}", code="invalid_path") from exc
        base = self._http.base_url
        if (url.scheme, url.host, url.port) != (base.scheme, base.host, base.port) or not url.raw_path.startswith(
            base.raw_path
        ):  # `relative_path` already refused what could get here; this holds even if it missed something
            raise InvalidRequest("The path leads outside the upstream's API.", code="invalid_path")
        return url

    async def list_models(self, *, query: str, headers: Mapping[str, str]) -> tuple[int, dict[str, str], bytes]:
        """The upstream's /models, with `context_length` added where LM Studio reports it (Chatbox reads it)."""
        proxied = await self.forward("GET", "models", query=query, headers=headers, body=None)
        body = b"".join([part async for part in proxied.body])
        contexts = await self.context_lengths() if proxied.status_code == 200 else {}
        return proxied.status_code, proxied.headers, _with_context_lengths(body, contexts)

    async def server_kind(self) -> ServerKind:
        """What answers at the base URL: LM Studio (its REST API), llama.cpp (`/props`), or another server."""
        now = time.monotonic()
        if self._kind is None or (self._kind[0] == "unreachable" and now - self._kind[1] > CAPABILITY_TTL / 4):
            self._kind = (await self._probe_kind(), now)
        return self._kind[0]

    async def supports_vision(self, model: str | None) -> bool:
        """Whether LM Studio reports vision for this model; False when it cannot tell."""
        for entry in await self._lmstudio_models():
            if model is None or model in entry.names:
                return entry.vision
        return False

    async def context_lengths(self) -> dict[str, int]:
        """Each model's context length as LM Studio reports it (loaded, else maximum); empty elsewhere."""
        return {name: e.context_length for e in await self._lmstudio_models() if e.context_length
                for name in e.names}

    async def context_length(self, model: str | None) -> int | None:
        """The context a request for `model` gets: LM Studio's loaded context for it (else its maximum), else
        llama.cpp's (`/props`, which serves one model whatever the request names); None when neither says."""
        lmstudio = await self.context_lengths()
        if lmstudio:
            return lmstudio.get(model or "")
        return await self._llamacpp_context()

    async def _llamacpp_context(self) -> int | None:
        now = time.monotonic()
        if self._props_context is None or now - self._props_context[1] >= CAPABILITY_TTL:
            self._props_context = (await self._fetch_llamacpp_context(), now)
        return self._props_context[0]

    async def _fetch_llamacpp_context(self) -> int | None:
        """`default_generation_settings.n_ctx` of llama.cpp's `GET /props`: the context of one slot, which is
        what one request gets when `--parallel` splits the server's (older builds and some forks put `n_ctx`
        at the top level)."""
        try:
            response = await self._http.get(self._root + "props", timeout=PROBE_TIMEOUT)
            if response.status_code != 200:
                return None
            props = response.json()
        except (httpx.TransportError, ValueError):
            return None
        if not isinstance(props, dict):
            return None
        settings = props.get("default_generation_settings")
        slot = _int(settings.get("n_ctx")) if isinstance(settings, dict) else None
        return slot or _int(props.get("n_ctx"))

    async def _probe_kind(self) -> ServerKind:
        try:
            for path in ("api/v1/models", "api/v0/models"):
                if (await self._http.get(self._root + path, timeout=PROBE_TIMEOUT)).status_code == 200:
                    return "lmstudio"
            response = await self._http.get(self._root + "props", timeout=PROBE_TIMEOUT)
            if response.status_code == 200 and "default_generation_settings" in response.text:
                return "llamacpp"
        except httpx.TransportError:
            return "unreachable"
        return "openai-compatible"

    async def _lmstudio_models(self) -> list["_ModelInfo"]:
        now = time.monotonic()
        if self._models is not None and now - self._models[1] < CAPABILITY_TTL:
            return self._models[0]
        models = await self._fetch_lmstudio_models()
        self._models = (models, now)
        return models

    async def _fetch_lmstudio_models(self) -> list["_ModelInfo"]:
        try:
            response = await self._http.get(self._root + "api/v1/models", timeout=PROBE_TIMEOUT)
            if response.status_code == 200:
                return [_ModelInfo.from_v1(entry) for entry in response.json().get("models") or []]
            response = await self._http.get(self._root + "api/v0/models", timeout=PROBE_TIMEOUT)
            if response.status_code == 200:
                return [_ModelInfo.from_v0(entry) for entry in response.json().get("data") or []]
        except (httpx.TransportError, ValueError, AttributeError):
            return []
        return []

    async def _send(self, request: httpx.Request, kind: str) -> httpx.Response:
        started = time.perf_counter()
        try:
            response = await self._http.send(request, stream=True)
        except httpx.TransportError as exc:
            raise failed_before_answer(exc, self.base_url, self.timeout) from exc
        if self._observe is not None:
            self._observe(kind, time.perf_counter() - started)
        return response

    async def _chunks(self, content_type: str, parts: AsyncIterator[bytes]) -> AsyncIterator[list[dict[str, Any]]]:
        streamed = content_type.startswith("text/event-stream")
        received = 0  # bytes of a whole JSON answer, to say where it broke off
        written = 0  # characters of a streamed answer, likewise: what its user saw arrive
        try:
            if not streamed:
                # Some servers ignore `stream: true`; one JSON completion is a turn of one chunk.
                body = []
                async for data in parts:
                    received += len(data)
                    body.append(data)
                yield [_decode(b"".join(body))]
                return
            finished = False
            events = EventBatcher()
            most = 1  # the first chunk goes on at once, then twice as many per batch up to MAX_BATCH
            async for data in parts:
                batch: list[dict[str, Any]] = []
                for event in events.feed(data):
                    if len(batch) >= most:
                        yield batch
                        batch, most = [], min(most * 2, MAX_BATCH)
                    if event == b"[DONE]":
                        if batch:
                            yield batch
                        return
                    if not event.strip():
                        continue
                    chunk = _decode(event)
                    if "error" in chunk and not chunk.get("choices"):
                        raise UpstreamError(f"Upstream error: {upstream_message(chunk['error'])}")
                    finished = finished or _has_finish_reason(chunk)
                    written += _answer_characters(chunk)
                    batch.append(chunk)
                if batch:
                    yield batch
            if not finished:
                # Neither [DONE] nor a finish_reason: the server died mid-answer. Passing that on as a
                # finished answer would hide that it is cut off.
                raise UpstreamCutOff("ended its stream unfinished", amount(written, "characters of the answer"))
        except BROKEN_READ as exc:
            arrived = (amount(written, "characters of the answer") if streamed
                       else amount(received, "bytes of its answer"))
            raise broken_read(exc, self.base_url, self.timeout, arrived) from exc


@dataclass(frozen=True)
class _ModelInfo:
    """What LM Studio's REST API says of one model."""

    names: frozenset[str]
    vision: bool
    context_length: int | None

    @classmethod
    def from_v1(cls, entry: dict[str, Any]) -> "_ModelInfo":
        instances = entry.get("loaded_instances") or []
        loaded = [_int((i.get("config") or {}).get("context_length")) for i in instances]
        names = {entry.get("key"), entry.get("id"), *(i.get("id") for i in instances)}
        return cls(
            names=frozenset(n for n in names if isinstance(n, str)),
            vision=bool((entry.get("capabilities") or {}).get("vision")),
            context_length=next((c for c in loaded if c), None) or _int(entry.get("max_context_length")),
        )

    @classmethod
    def from_v0(cls, entry: dict[str, Any]) -> "_ModelInfo":
        context = _int(entry.get("loaded_context_length")) or _int(entry.get("max_context_length"))
        return cls(frozenset([str(entry.get("id"))]), entry.get("type") == "vlm", context)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and value > 0 else None


def _decode(data: str | bytes) -> dict[str, Any]:
    try:
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError:
        chunk = _decode_leniently(data)  # what orjson refuses and Python reads (NaN, -Infinity in logprobs)
    if not isinstance(chunk, dict):
        raise UpstreamError("The upstream sent a chunk that is not a JSON object")
    return chunk


def _decode_leniently(data: str | bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError as exc:
        shown = data.decode(errors="replace") if isinstance(data, bytes) else data
        raise UpstreamError(f"The upstream sent something that is not JSON: {shown[:200]!r}") from exc


def _json_bytes(body: dict[str, Any]) -> bytes:
    """The body as strict JSON. Python's parser accepted lone surrogates from the client; no server can
    read them back, so they are the client's error, found where the body is encoded anyway. (NaN and
    Infinity were refused when the body was read: app/api/chat_body.py.)"""
    try:
        return orjson.dumps(body)
    except orjson.JSONEncodeError:
        pass  # the standard library says what exactly is wrong, or encodes what orjson does not (huge ints)
    try:
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    except UnicodeEncodeError as exc:
        raise InvalidRequest(
            "The request holds text that is not valid Unicode (a lone surrogate such as \\ud800).",
            code="invalid_unicode",
        ) from exc
    except ValueError as exc:
        raise InvalidRequest(
            "The request holds a number JSON cannot carry (NaN or Infinity).", code="invalid_number"
        ) from exc


async def _nothing() -> AsyncIterator[bytes]:
    return
    yield b""


def _answer_characters(chunk: dict[str, Any]) -> int:
    """The characters of answer text a chunk carries: content, reasoning and tool-call arguments (of its first
    choice: the only one the loop folds). Run on every chunk, so the usual one costs three lookups."""
    choices = chunk.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    delta = choice.get("delta") if isinstance(choice, dict) else None
    if not isinstance(delta, dict):
        return 0
    count = 0
    for text in (delta.get("content"), delta.get("reasoning_content") or delta.get("reasoning")):
        if isinstance(text, str):
            count += len(text)
    for call in delta.get("tool_calls") or ():
        arguments = (call.get("function") or {}).get("arguments") if isinstance(call, dict) else None
        count += len(arguments) if isinstance(arguments, str) else 0
    return count


def _has_finish_reason(chunk: dict[str, Any]) -> bool:
    choices = chunk.get("choices")
    return isinstance(choices, list) and any(isinstance(c, dict) and c.get("finish_reason") for c in choices)


def _with_context_lengths(body: bytes, contexts: dict[str, int]) -> bytes:
    if not contexts:
        return body

    def add(entries: list[Any]) -> list[Any]:
        for entry in entries:
            if isinstance(entry, dict) and entry.get("id") in contexts and "context_length" not in entry:
                entry["context_length"] = contexts[entry["id"]]
        return entries

    return rewrite_model_list(body, add)
