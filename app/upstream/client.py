"""The upstream as the rest of the gateway sees it: chat streams, pass-through requests, `/models`, and what
the upstream can do.

Built on the two below it: the HTTP (app/upstream/transport.py: the pool, sending, transport failures in
the gateway's errors) and the capabilities (app/upstream/capabilities.py: LM Studio's and llama.cpp's
own endpoints). Beside it, what people see of the upstream (watch.py: whether it answers, since when, its
models) and the last model list it gave (last_models.py), served while it cannot answer. Nothing else in the
gateway speaks HTTP to the upstream.
"""

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Self

import httpx
import orjson

from app.openai.errors import InvalidRequest, UpstreamError, UpstreamStatusError
from app.openai.schemas import rewrite_model_list
from app.openai.wire import ChatBody, JSONObject, JSONValue
from app.settings.vocabularies import TransportKind
from app.state import StateStore
from app.upstream.capabilities import Capabilities, ServerKind
from app.upstream.chunks import chunk_batches
from app.upstream.last_models import LastModels, ModelList
from app.upstream.paths import relative_path, without_credentials
from app.upstream.relay import read_whole, relay_events, relay_rest
from app.upstream.transport import Observe, Transport, UpstreamHttp, aiohttp_transport
from app.upstream.watch import UpstreamWatch

# Transport is re-exported: the app and its lifespan name it from here.
__all__ = ["ProxiedResponse", "Transport", "TransportKind", "UpstreamClient", "make_transport"]

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


def make_transport(kind: TransportKind) -> Transport | None:
    """The transport the setting names; `None` means httpx's own (app/upstream/transport.py says why aiohttp)."""
    return aiohttp_transport() if kind == "aiohttp" else None


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
        observe: Observe | None = None,
        models_store: StateStore | None = None,
    ) -> None:
        """`observe(kind, seconds)` learns how long each chat or pass-through request took to its headers;
        `models_store` keeps the last model list (None: this process alone)."""
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._key = api_key
        self._http = UpstreamHttp(self.base_url, api_key=api_key, timeout=timeout, transport=transport,
                                  observe=observe)
        self._capabilities = Capabilities(self._http)
        self.watch = UpstreamWatch(self._http, self._capabilities)
        self.last_models = LastModels(self.base_url, models_store)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.watch.aclose()
        await self._http.aclose()

    @asynccontextmanager
    async def stream_chat(self, body: ChatBody) -> AsyncIterator[AsyncIterator[list[JSONObject]]]:
        """Opens a streamed chat completion and yields its chunks as dicts, in batches: the chunks that
        arrived in one read.

        Raises:
            InvalidRequest: the body holds what JSON cannot carry (NaN, a lone surrogate); nothing is sent.
            UpstreamUnreachable, UpstreamTimeout, UpstreamStatusError: before any chunk is yielded.
            UpstreamError: when the stream breaks or carries an error event.
        """
        answer = await self._http.post_chat(_json_bytes(body))
        try:
            if answer.status >= 400:
                raise UpstreamStatusError(answer.status, await answer.read(),
                                          retry_after=answer.headers.get("retry-after"))
            yield chunk_batches(answer.headers.get("content-type", ""), answer.parts, self._http.broken)
        except UpstreamError as exc:
            self._hide_key(exc)
            raise
        finally:
            await answer.aclose()

    def _hide_key(self, error: UpstreamError) -> None:
        """The upstream's words go to the client; some servers quote the key they refused ("Incorrect API key
        provided: sk-..."), which is the operator's, never the client's to see."""
        if self._key and self._key in error.message:
            error.message = error.message.replace(self._key, "(the upstream key)")
            error.args = (error.message,)

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
        request = self._http.request(method, url, headers=sent_headers, content=body if has_body else None)
        response = await self._http.send(request, "passthrough")
        kept = {k: v for k, v in response.headers.items() if k.lower() not in _RESPONSE_HEADERS_DROPPED}
        return ProxiedResponse(response.status_code, kept, await self._body(response), response)

    async def list_models(self, *, query: str, headers: Mapping[str, str]) -> ModelList:
        """The upstream's /models, with `context_length` added where LM Studio reports it (Chatbox reads it).
        While the upstream cannot answer (no answer, or a 5xx), the last list it gave (last_models.py); with none,
        its failure as it came. Its own 4xx is its answer.

        Raises:
            UpstreamError: no answer came, and no list ever did.
        """
        try:
            proxied = await self.forward("GET", "models", query=query, headers=headers, body=None)
            body = b"".join([part async for part in proxied.body])
        except UpstreamError as exc:
            self.watch.saw(False, exc.message)
            if (last := await self.last_models.answer(exc.code or exc.message)) is None:
                raise
            return last
        status = proxied.status_code
        self.watch.saw(True, None if status == 200 else f"It answered {status} to GET /models.")
        if status >= 500:
            return await self.last_models.answer(f"it answered {status}") or ModelList(status, proxied.headers, body)
        if status != 200:
            return ModelList(status, proxied.headers, body)
        body = _with_context_lengths(body, await self.context_lengths())
        await self.last_models.remember(body)
        return ModelList(status, proxied.headers, body)

    async def server_kind(self) -> ServerKind:
        """What answers at the base URL: LM Studio (its REST API), llama.cpp (`/props`), or another server."""
        return await self._capabilities.server_kind()

    async def supports_vision(self, model: str | None) -> bool:
        """Whether LM Studio reports vision for this model; False when it cannot tell."""
        return await self._capabilities.supports_vision(model)

    async def context_lengths(self) -> dict[str, int]:
        """Each model's context length as LM Studio reports it (loaded, else maximum); empty elsewhere."""
        return await self._capabilities.context_lengths()

    async def context_length(self, model: str | None) -> int | None:
        """The context a request for `model` gets: LM Studio's, else llama.cpp's; None when neither says."""
        return await self._capabilities.context_length(model)

    async def _body(self, response: httpx.Response) -> AsyncIterator[bytes]:
        """A pass-through answer's body: events as they come, anything else read whole first, so that a cut is
        said in words (app/upstream/relay.py).

        Raises:
            UpstreamError: a body read whole broke off (a 502 in words) or stalled (a 504).
        """
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return relay_events(response.aiter_bytes(), self._http.broken)
        parts = response.aiter_bytes()
        try:
            read, whole = await read_whole(parts, self._http.broken)
        except UpstreamError:
            await response.aclose()
            raise
        return relay_rest(read, _nothing() if whole else parts)

    def _url_below_base(self, path: str, query: str) -> httpx.URL:
        try:
            url = httpx.URL(f"{self.base_url}/{path}", query=query.encode())
        except httpx.InvalidURL as exc:
            raise InvalidRequest(f"The path cannot be sent on: {exc}", code="invalid_path") from exc
        base = self._http.api_url
        if (url.scheme, url.host, url.port) != (base.scheme, base.host, base.port) or not url.raw_path.startswith(
            base.raw_path
        ):  # `relative_path` already refused what could get here; this holds even if it missed something
            raise InvalidRequest("The path leads outside the upstream's API.", code="invalid_path")
        return url


def _json_bytes(body: ChatBody) -> bytes:
    """The body as strict JSON. Python's parser accepted lone surrogates from the client; no server can
    read them back, so they are the client's error, found where the body is encoded anyway. (NaN and
    Infinity were refused when the body was read: app/api/chat_body.py.)"""
    try:
        return orjson.dumps(body)
    except orjson.JSONEncodeError as exc:
        failure = str(exc)
    # What orjson says it found spares the standard library's encoding, on the event loop: 0.1-0.2 s of a
    # 40 MB body. Anything else, or a message worded otherwise, is the standard library's to say.
    if "surrogates" in failure:
        raise _not_unicode()
    if "64-bit" in failure:  # integers past 64 bits (a seed), which the client's JSON may carry: written as sent
        try:
            return orjson.dumps(_long_integers_written(body))
        except (orjson.JSONEncodeError, RecursionError):
            pass
    try:
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    except UnicodeEncodeError as exc:
        raise _not_unicode() from exc
    except ValueError as exc:
        raise InvalidRequest(
            "The request holds a number JSON cannot carry (NaN or Infinity).", code="invalid_number"
        ) from exc
    except RecursionError:  # read by orjson (1,024 levels), but past what the standard library writes
        raise InvalidRequest("The request holds arrays or objects nested too deeply to send on.",
                             code="invalid_nesting") from None


def _not_unicode() -> InvalidRequest:
    return InvalidRequest("The request holds text that is not valid Unicode (a lone surrogate such as \\ud800).",
                          code="invalid_unicode")


def _long_integers_written(value: object) -> object:
    """The value with every integer orjson cannot write made the JSON text of it."""
    if isinstance(value, dict):
        return {key: _long_integers_written(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_long_integers_written(item) for item in value]
    if isinstance(value, int) and not -(2**63) <= value < 2**64:
        return orjson.Fragment(str(value))
    return value


async def _nothing() -> AsyncIterator[bytes]:
    return
    yield b""


def _with_context_lengths(body: bytes, contexts: dict[str, int]) -> bytes:
    """A /models body with each listed model's `context_length` added where the server left it out."""
    if not contexts:
        return body

    def add(entries: list[JSONValue]) -> list[JSONValue]:
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            model = entry.get("id")
            if isinstance(model, str) and model in contexts and "context_length" not in entry:
                entry["context_length"] = contexts[model]
        return entries

    return rewrite_model_list(body, add)
