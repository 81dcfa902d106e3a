"""What every front door's route does alike: the request's needs gathered for the chat service, a body read as
JSON, the chat body a door made of it answered, and the answer sent streamed (in the door's own framing) or
whole, watching for a client that leaves and for the server shutting down: from the wait for the model's first
word (a whole answer from the model is all of the wait) to the last byte.

Every door's routes (app/doors/*/routes.py) share all of it; a door's own modules add only its translation.
"""

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar, cast

import anyio
import anyio.to_thread
from fastapi import Request
from fastapi.responses import Response, StreamingResponse
from sse_starlette import EventSourceResponse

from app.access import KeyRing, KeyScope
from app.api.chat_body import OFF_LOOP_BYTES, checked_chat_body, parse_json
from app.api.deps import presented_key
from app.chat import (
    CUT_OFF_MESSAGE,
    SHUTTING_DOWN,
    ChatNeeds,
    ChatPool,
    ChatReply,
    MemoryStores,
    PersonView,
    RequestStats,
    ShutdownCutoff,
    SignInWaits,
    Turn,
    answer_chat,
    memory_owner,
)
from app.doors.door import Answer, Door, DoorContext, Exchange, Stream, Streamed, Timing, Whole
from app.mcp import KeyView, McpPool
from app.openai.errors import ClientLeft, InvalidRequest, Overloaded
from app.openai.wire import ChatBody, JSONObject
from app.ops.recent_requests import DOOR
from app.serving import ON_SHUTDOWN
from app.settings import Settings
from app.upstream import UpstreamClient

SSE_PING_SECONDS = 15
CUTOFF = "toolbridge.cutoff"  # scope key: the request's one ShutdownCutoff
T = TypeVar("T")


async def read_body(raw: Request, read: Callable[[bytes, str | None], T]) -> T:
    """What `read` makes of the request's body and content type. A body past OFF_LOOP_BYTES is read in a worker
    thread: parsing, checking and translating it take the GIL value by value there, so the event loop answers
    other requests in between (one long C call does not let it: hence the bounds of chat_body.py)."""
    return await _off_loop(len(body := await raw.body()) > OFF_LOOP_BYTES, read, body, raw.headers.get("content-type"))


async def read_json_object(raw: Request, translate: Callable[[JSONObject], T]) -> T:
    """What `translate` (a door's reading of its request) makes of the request's body as a JSON object, with the
    chat body's checks (content type, NaN, long integers, what one request carries); see read_body.

    Raises:
        RequestValidationError, InvalidRequest: as parse_chat_body's, and as `translate` raises.
    """

    def read(body: bytes, content_type: str | None) -> T:
        parsed = parse_json(body, content_type)
        if not isinstance(parsed, dict):
            raise InvalidRequest("The request body must be a JSON object.")
        return translate(parsed)

    return await read_body(raw, read)


async def answer(raw: Request, door: Door, chat_body: Mapping[str, object]) -> tuple[ChatReply, PersonView | None]:
    """The chat service's answer to the chat body a door made of its request, begun (the upstream accepted the
    request), and how it shows the person what tool results address to them.

    Raises:
        InvalidRequest: the door made a chat body the wire model refuses (what it could not translate), or one
            that carries more than a request may (chat_body.py).
        GatewayError: as answer_chat's.
    """
    DOOR.set(door.name)  # for the status page's recent requests
    await _off_loop(len(await raw.body()) > OFF_LOOP_BYTES, checked_chat_body, chat_body, door.conversation)
    # Checked just above as a chat body sent to /v1/chat/completions is (chat_body.py's parse_chat_body).
    turn = Turn.from_request(cast(ChatBody, chat_body), raw.headers)
    settings: Settings = raw.state.settings
    reply = await answer_chat(turn, chat_needs(raw, settings))
    return reply, person_view(raw, settings)


async def _off_loop(large: bool, work: Callable[..., T], *args: Any) -> T:
    return await anyio.to_thread.run_sync(work, *args) if large else work(*args)


async def serve_chat(raw: Request, door: Door) -> Response:
    """A door's chat: its request parsed by the door, its turn answered by the chat service, the answer sent as the
    door renders it, streamed or whole. Everything before the first byte is sent is watched once (`watched`): the
    wait for the model's first word and, for a whole answer, all of it. A stream's sending is watched by
    sse-starlette and the request's ShutdownCutoff, which goes on into it.

    Raises:
        RequestValidationError, InvalidRequest: as read_json_object's and the door's parse. GatewayError: as
            answer_chat's. Overloaded: cut off by the shutdown before the first byte (503 `shutting_down`).
            ClientLeft: the client hung up first (a 499 in the log).
    """
    started = time.perf_counter_ns()
    exchange = await read_json_object(raw, door.parse)
    try:
        sending = await watched(raw, _answered(raw, door, exchange, started))
    except BaseException:
        request_cutoff(raw).end()
        raise
    if isinstance(sending, Response):
        request_cutoff(raw).end()
        return sending
    return send_stream(raw, sending)


async def _answered(raw: Request, door: Door, exchange: Exchange, started: int) -> Response | Streamed:
    """The whole answer's response, or (begun) the stream to send."""
    reply, person = await answer(raw, door, await exchange.chat_body(lambda: door_context(raw)))
    rendering = exchange.render(reply, person, Timing(started, time.perf_counter_ns()))
    # The doors' own classes first: a runtime Protocol's isinstance reads every member of it, each request.
    if isinstance(rendering, Answer) or (not isinstance(rendering, Stream) and isinstance(rendering, Whole)):
        return Response(await rendering.body(), media_type=rendering.media_type)
    return rendering


def door_context(raw: Request) -> DoorContext:
    """What a door's request may need of the app: where memory keeps things, the caller's owner, the body's bound."""
    settings: Settings = raw.state.settings
    memory: MemoryStores | None = getattr(raw.state, "memory", None)
    store = None if memory is None else memory.turns if memory.turns is not None else memory.pending
    owner = memory_owner(presented_key(raw) if settings.access.authenticates else None)  # as OwnerDep's
    return DoorContext(store, owner, settings.server.max_body_bytes)


def send_stream(raw: Request, answer: Streamed) -> Response:
    """Sends the answer's frames as they come (an SSE event, an NDJSON line), ending with the door's own words when
    the shutdown grace runs out. Server-sent events get sse-starlette's pings and shutdown handling; other media
    types (NDJSON) a plain stream."""
    settings: Settings = raw.state.settings
    frames = answer.frames(request_cutoff(raw))
    if answer.media_type != "text/event-stream":
        return StreamingResponse(frames, media_type=answer.media_type)
    # sse-starlette would end every stream at the first signal; the grace lets answers in flight finish.
    grace = settings.server.shutdown_grace
    return EventSourceResponse(frames, sep="\n", ping=SSE_PING_SECONDS, shutdown_grace_period=grace)


def request_cutoff(raw: Request) -> ShutdownCutoff:
    """The request's cut-off at shutdown, made when it first waits. The server tells it once (ON_SHUTDOWN, from
    app/serving.py), so the grace counts from then whichever part of the answer is running."""
    cutoff: ShutdownCutoff | None = raw.scope.get(CUTOFF)
    if cutoff is None:
        settings: Settings = raw.state.settings
        cutoff = raw.scope[CUTOFF] = ShutdownCutoff(settings.server.shutdown_grace)
        raw.scope[ON_SHUTDOWN] = cutoff.begin
    return cutoff


def chat_needs(raw: Request, settings: Settings) -> ChatNeeds:
    """What the chat service needs of the lifespan's resources, as the request's key may use them."""
    state = raw.state
    upstream: UpstreamClient = state.upstream  # typed here, so that mypy checks they keep the service's ports
    pool: McpPool = state.pool
    scope: KeyScope = state.key_scope  # set by the guard
    keys: KeyRing = state.keys
    # A key limited to some servers, or one the keys file may take out, sees the pool through a view, which asks
    # the file again before each call.
    view = KeyView(pool, scope, keys.now)
    chat_pool: ChatPool = pool if scope.everything and not scope.digest else view
    stats: RequestStats = getattr(state, "request_stats", None) or RequestStats()  # set by the request log
    return ChatNeeds(settings=settings, upstream=upstream, pool=chat_pool, memory=state.memory, stats=stats,
                     recent=getattr(state, "recent_requests", None),
                     sign_ins=_sign_ins(pool, view), base_url=base_url(raw, settings))


def _sign_ins(pool: McpPool, view: KeyView) -> SignInWaits | None:
    """The key's servers that wait for a sign-in (their links go into answers), asked only of a pool with a remote
    server: a stdio one never signs in, and reading the states costs 2 µs a server on every chat."""
    return view if pool.sign_ins.any else None


def base_url(raw: Request, settings: Settings) -> Callable[[], str]:
    """Where the person's browser reaches the gateway, for links in answers (images, sign-in): TOOLBRIDGE_PUBLIC_URL,
    else the address the client used (the Host it sent). Lazily: Starlette's base_url costs 20 µs, a third of what
    the chat lane saves every request."""
    return lambda: settings.server.public_url or str(raw.base_url)


def person_view(raw: Request, settings: Settings) -> PersonView | None:
    """How this request's answer shows the person what tool results address to them (image links: `base_url`)."""
    if not settings.tools.show_user_content:
        return None
    return PersonView(raw.state.images, base_url(raw, settings), settings.tools.image_inline_bytes)


async def watched(raw: Request, work: Awaitable[T]) -> T:
    """Runs a part of the answer before its first byte is sent, cancelling it (upstream request, MCP calls, further
    rounds) when the client disconnects, or when the shutdown grace runs out. Streams, once begun, get the same
    from sse-starlette and ShutdownCutoff.

    The watcher is a plain task cancelled when the work ends, not a task group: a group's cancellation
    on every request cost more than the rest of the watching (bench/compare.py).

    Raises:
        Overloaded: cut off by the shutdown (503 `shutting_down`). ClientLeft: the client hung up.
    """
    cutoff = request_cutoff(raw)
    with anyio.CancelScope() as work_scope:
        cutoff.on_cut = work_scope.cancel
        if cutoff.cut:  # the grace ran out between two parts of the answer
            work_scope.cancel()

        async def watch() -> None:
            while (await raw.receive())["type"] != "http.disconnect":
                continue
            work_scope.cancel()

        watcher = asyncio.get_running_loop().create_task(watch())
        try:
            return await work
        finally:
            watcher.cancel()
            cutoff.on_cut = None
    if cutoff.cut:
        raise Overloaded(CUT_OFF_MESSAGE, code=SHUTTING_DOWN)
    raise ClientLeft()
