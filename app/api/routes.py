"""HTTP in and out: chat completions, pass-through of the rest of /v1, health, and the lists of tools, prompts
and resources."""

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Annotated, Any

import anyio
import orjson
from fastapi import APIRouter, Header, Request
from fastapi.responses import Response, StreamingResponse
from sse_starlette import EventSourceResponse
from starlette.background import BackgroundTask

from app.access import KeyScope
from app.api.chat_body import parse_chat_body
from app.api.deps import (
    AuthorisedDep,
    ImagesDep,
    KeyScopeDep,
    KeysDep,
    MemoryDep,
    MetricsDep,
    SettingsDep,
    UpstreamDep,
    ViewDep,
)
from app.api.health import health_report
from app.chat.images import StoredImage
from app.chat.loop_options import loop_options, tool_budget_for
from app.chat.ports import RequestStats, SignInWaits
from app.chat.service import ChatNeeds, ChatPool, answer_chat
from app.chat.shown import ROUTE as IMAGES_ROUTE
from app.chat.shown import PersonView
from app.chat.streaming import SHUTTING_DOWN, ShutdownCutoff
from app.chat.tool_offer import describe_offer, describe_request
from app.chat.toolsets import HEADER as TOOLS_HEADER
from app.chat.toolsets import choose_tools, with_virtual_models
from app.mcp import KeyView, McpPool
from app.openai.errors import Forbidden, MethodNotAllowed, Overloaded, RouteNotFound
from app.ops.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from app.serving import ON_SHUTDOWN
from app.settings import Settings
from app.upstream import UpstreamClient

SSE_PING_SECONDS = 15
CLIENT_CLOSED_REQUEST = 499  # nginx's status for "the client went away first"; only the log sees it

# Who may call what is decided before any route runs (app/api/guard.py).
router = APIRouter()


@router.post("/v1/chat/completions")
async def chat_completions(raw: Request) -> Response:
    """The chat service's answer (app/chat/service.py), streamed as server-sent events or sent whole."""
    # Nothing for FastAPI to resolve on the busiest route: its dependency solving cost a tenth of a request.
    settings: Settings = raw.state.settings
    body, request = parse_chat_body(await raw.body(), raw.headers.get("content-type"))
    reply = await answer_chat(body, request, _chat_needs(raw, settings))
    person = _person_view(raw, settings)
    if request.stream:
        cutoff = ShutdownCutoff(settings.shutdown_grace)
        raw.scope[ON_SHUTDOWN] = cutoff.begin  # called by the server (app/serving.py) as it starts shutting down
        # sse-starlette would end every stream at the first signal; the grace lets answers in flight finish.
        return EventSourceResponse(_server_sent(cutoff.payloads(reply.payloads(person))), sep="\n",
                                   ping=SSE_PING_SECONDS, shutdown_grace_period=settings.shutdown_grace)
    completion = await _unless_client_leaves(raw, reply.completion(person), settings.shutdown_grace)
    if completion is None:
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    return Response(orjson.dumps(completion), media_type="application/json")


def _chat_needs(raw: Request, settings: Settings) -> ChatNeeds:
    """What the chat service needs of the lifespan's resources and of the request's headers."""
    state = raw.state
    upstream: UpstreamClient = state.upstream  # typed here, so that mypy checks they keep the service's ports
    pool: McpPool = state.pool
    scope: KeyScope = state.key_scope  # set by the guard; a key limited to some servers sees the pool through a view
    view = KeyView(pool, scope)
    chat_pool: ChatPool = pool if scope.everything else view
    stats: RequestStats = getattr(state, "request_stats", None) or RequestStats()  # set by the request log
    return ChatNeeds(settings=settings, upstream=upstream, pool=chat_pool, memory=state.memory, stats=stats,
                     headers=raw.headers, recent=getattr(state, "recent_requests", None),
                     sign_ins=_sign_ins(pool, view), base_url=_base_url(raw, settings))


def _sign_ins(pool: McpPool, view: KeyView) -> SignInWaits | None:
    """The key's servers that wait for a sign-in (their links go into answers), asked only of a pool with a remote
    server: a stdio one never signs in, and reading the states costs 2 µs a server on every chat."""
    return view if pool.sign_ins.any else None


def _base_url(raw: Request, settings: Settings) -> Callable[[], str]:
    """Where the person's browser reaches the gateway, for links in answers (images, sign-in): TOOLBRIDGE_PUBLIC_URL,
    else the address the client used (the Host it sent). Lazily: Starlette's base_url costs 20 µs, a third of what
    the chat lane saves every request."""
    return lambda: settings.public_url or str(raw.base_url)


def _person_view(raw: Request, settings: Settings) -> PersonView | None:
    """How this request's answer shows the person what tool results address to them (image links: `_base_url`)."""
    if not settings.show_user_content:
        return None
    return PersonView(raw.state.images, _base_url(raw, settings), settings.image_inline_bytes)


async def _server_sent(payloads: AsyncGenerator[dict[str, Any] | str, None]) -> AsyncIterator[bytes]:
    """Each payload as one SSE event, encoded here (sse-starlette sends bytes as they are)."""
    async with aclosing(payloads):
        async for payload in payloads:
            yield b"data: " + (payload.encode() if isinstance(payload, str) else orjson.dumps(payload)) + b"\n\n"


async def _unless_client_leaves(raw: Request, work: Awaitable[dict[str, Any]], grace: float) -> dict[str, Any] | None:
    """Runs a non-streamed completion, cancelling it (upstream request, MCP calls, further rounds) when the
    client disconnects, or when the shutdown grace runs out (then a 503 `shutting_down`). Streams get the
    same from sse-starlette and ShutdownCutoff.

    The watcher is a plain task cancelled when the work ends, not a task group: a group's cancellation
    on every request cost more than the rest of the watching (bench/compare.py)."""
    with anyio.CancelScope() as work_scope:
        cutoff = ShutdownCutoff(grace, on_cut=work_scope.cancel)
        raw.scope[ON_SHUTDOWN] = cutoff.begin

        async def watch() -> None:
            while (await raw.receive())["type"] != "http.disconnect":
                continue
            work_scope.cancel()

        watcher = asyncio.get_running_loop().create_task(watch())
        try:
            return await work
        finally:
            watcher.cancel()
            cutoff.end()
    if cutoff.cut:
        raise Overloaded("The gateway is shutting down; this answer was cut off. Send the request again.",
                         code=SHUTTING_DOWN)
    return None  # cancelled: the client left


@router.api_route("/v1/chat/completions", methods=["GET", "PUT", "PATCH", "DELETE"], include_in_schema=False)
async def chat_completions_other_methods(request: Request) -> Response:
    raise MethodNotAllowed(request.method, request.url.path, "POST")


@router.get("/tools")
async def list_tools(
    pool: ViewDep, settings: SettingsDep, upstream: UpstreamDep, model: str | None = None, q: str | None = None,
    tools_header: Annotated[str | None, Header(alias=TOOLS_HEADER)] = None,
) -> dict[str, Any]:
    """The MCP tools a request is offered (for `model`, a virtual one naming a toolset, and the tools header
    when given), each with the server and MCP tool it maps to; with `q`, the text of a user's message, each
    with its relevance and whether the tool budget would offer it."""
    body, selection = choose_tools({"model": model}, tools_header, settings.toolsets, pool.knows)
    budget = await tool_budget_for(settings, upstream, body.get("model"))
    return describe_offer(pool.tools_for_request(selection=selection).catalogue, q, budget)


@router.post("/tools")
async def tools_for_chat(raw: Request, pool: ViewDep, settings: SettingsDep, upstream: UpstreamDep) -> dict[str, Any]:
    """What a chat request with this body is offered: its own tools (`client`, as they would be sent) and the
    MCP tools, each with its relevance and whether the tool budget keeps it; the names withheld, and `why`.
    The body is a chat completion's, checked the same way; nothing is sent upstream. Earlier turns' calls
    that memory would give back are not looked up, so a tool called before may show as withheld here."""
    sent, _ = parse_chat_body(await raw.body(), raw.headers.get("content-type"))
    body, selection = choose_tools(sent, raw.headers.get(TOOLS_HEADER), settings.toolsets, pool.knows)
    client_tools = [tool for tool in body.get("tools") or [] if isinstance(tool, dict)]
    names = frozenset(str((tool.get("function") or {}).get("name")) for tool in client_tools)
    offered = loop_options(settings, body, upstream, selection).offer_tools
    catalogue = pool.tools_for_request(offered=offered, client_tools=names, selection=selection).catalogue
    budget = await tool_budget_for(settings, upstream, body.get("model"))
    return describe_request(catalogue, body["messages"], client_tools, budget)


@router.get("/prompts")
async def list_prompts(pool: ViewDep) -> dict[str, Any]:
    """The MCP servers' prompts, each with the slash command that runs it in chat."""
    return {"object": "list", "data": [entry.describe() for entry in pool.prompt_book.listed()]}


@router.get("/resources")
async def list_resources(pool: ViewDep) -> dict[str, Any]:
    """Each MCP server's resources and URI templates as last listed, and the tool that reads them."""
    return {"object": "list", "data": [{"server": name, **listing} for name, listing in pool.resources().items()]}


@router.get("/v1/models")
async def list_models(request: Request, upstream: UpstreamDep, settings: SettingsDep, pool: ViewDep) -> Response:
    """The upstream's models, and a virtual model per toolset of which the caller's key may use something."""
    status, headers, body = await upstream.list_models(query=request.url.query, headers=request.headers)
    if status == 200:
        usable = {name: members for name, members in settings.toolsets.items()
                  if pool.scope.everything or any(pool.knows(member) for member in members)}
        body = with_virtual_models(body, usable)
    return Response(body, status, headers=headers)


async def passthrough(path: str, request: Request, upstream: UpstreamDep) -> Response:
    """Every other OpenAI endpoint (models, embeddings, completions...) goes to the upstream as is."""
    # The raw path, as the client encoded it: the decoded one has lost what %2F and %2e%2e were.
    raw_path = request.scope.get("raw_path", path.encode()).decode("latin-1").split("?", 1)[0]
    proxied = await upstream.forward(
        request.method,
        raw_path.removeprefix(request.scope.get("root_path", "")).removeprefix("/v1/"),
        query=request.url.query,
        headers=request.headers,
        body=request.stream(),
    )
    return StreamingResponse(
        proxied.body,
        status_code=proxied.status_code,
        headers=proxied.headers,
        background=BackgroundTask(proxied.aclose),
    )


for _method in ("GET", "POST", "PUT", "PATCH", "DELETE"):  # one route a method: /openapi.json needs unique ids
    router.add_api_route("/v1/{path:path}", passthrough, methods=[_method], name=f"passthrough_{_method.lower()}")


@router.get(f"/{IMAGES_ROUTE}{{image_id}}")
async def image(image_id: str, images: ImagesDep) -> Response:
    """An image a tool returned, shown in an answer. No key: the `<img>` of a chat page cannot send one, so the
    unguessable id that only the answer carries is the key (app/chat/images.py, app/api/guard.py)."""
    stored = images.get(image_id)
    if stored is None:
        raise RouteNotFound(
            "No such image: the link is wrong, or the image expired (TOOLBRIDGE_IMAGE_MAX_AGE_HOURS), made room "
            "for newer ones (TOOLBRIDGE_IMAGE_STORE_MB) or was lost when the gateway restarted.",
            code="image_not_found",
        )
    return Response(stored.data, media_type=stored.mime_type, headers=_image_headers(stored))


def _image_headers(stored: StoredImage) -> dict[str, str]:
    # Shown as an image and nothing else: no sniffing into another type, no script or style should a browser
    # ever open it as a document; any page may embed it (that is its purpose), no shared cache keeps it.
    return {
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "default-src 'none'; sandbox",
        "Cross-Origin-Resource-Policy": "cross-origin",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": f"private, max-age={stored.seconds_left()}, immutable",
    }


@router.get("/metrics", include_in_schema=False)
async def metrics(collected: MetricsDep, scope: KeyScopeDep, settings: SettingsDep) -> Response:
    """Prometheus text format; behind the API key unless TOOLBRIDGE_METRICS_PUBLIC (app/api/guard.py). They name
    every server: the operator's, not for a key limited to some servers."""
    if not scope.everything and not settings.metrics_public:
        raise Forbidden("The metrics name every MCP server: a key of TOOLBRIDGE_API_KEYS reads them.",
                        code="metrics_not_for_this_key")
    return Response(collected.render(), media_type=METRICS_CONTENT_TYPE)


@router.get("/health")
async def health(
    pool: ViewDep, upstream: UpstreamDep, authorised: AuthorisedDep, settings: SettingsDep, memory: MemoryDep,
    keys: KeysDep,
) -> dict[str, Any]:
    return await health_report(pool, upstream, settings, authorised, memory, keys)
