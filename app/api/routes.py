"""HTTP in and out: chat completions, pass-through of the rest of /v1, health and the tool list."""

import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from sse_starlette import EventSourceResponse
from starlette.background import BackgroundTask

from app.api.deps import AuthorisedDep, MetricsDep, MixedTurnsDep, PoolDep, SettingsDep, StatsDep, UpstreamDep
from app.errors import InvalidRequest, MethodNotAllowed
from app.loop import run_tool_loop
from app.mcp.convert import resolve_profile
from app.mcp.results import system_hint
from app.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from app.open_webui import is_background_task
from app.openai.schemas import ChatCompletionRequest
from app.settings import Settings
from app.streaming import collect_completion, stream_payloads
from app.trace import TRACE_MODES, TraceMode
from app.upstream.client import UpstreamClient

SSE_PING_SECONDS = 15
CLIENT_CLOSED_REQUEST = 499  # nginx's status for "the client went away first"; only the log sees it

# Who may call what is decided before any route runs (app/api/guard.py).
router = APIRouter()


@router.post("/v1/chat/completions")
async def chat_completions(
    raw: Request,
    request: ChatCompletionRequest,
    upstream: UpstreamDep,
    pool: PoolDep,
    settings: SettingsDep,
    stats: StatsDep,
    mixed_turns: MixedTurnsDep,
    trace_header: Annotated[str | None, Header(alias="X-Toolbridge-Trace")] = None,
) -> Response:
    trace = _trace_mode(trace_header, settings)
    body = request.to_upstream_body()
    background_task = settings.skip_tools_for_tasks and is_background_task(body["messages"])
    events = run_tool_loop(
        body,
        upstream,
        pool,
        max_tool_rounds=settings.max_tool_rounds,
        stats=stats,
        system_hint=system_hint(settings.result_format) if settings.system_hint else None,
        sees_images=_vision_check(settings, upstream, request.model),
        offer_tools=not background_task,
        mixed_turns=mixed_turns,
    )
    # Wait until the upstream accepted the request, so its failures still get a real HTTP status.
    try:
        await anext(events)
    except BaseException:
        await events.aclose()
        raise
    if request.stream:
        payloads = stream_payloads(events, model=request.model, include_usage=request.include_usage, trace=trace)
        # sse-starlette would end every stream at the first signal; the grace lets answers in flight finish.
        return EventSourceResponse(payloads, sep="\n", ping=SSE_PING_SECONDS,
                                   shutdown_grace_period=settings.shutdown_grace)
    completion = await _unless_client_leaves(raw, collect_completion(events, model=request.model, trace=trace))
    if completion is None:
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    return JSONResponse(completion)


async def _unless_client_leaves(raw: Request, work: Awaitable[dict[str, Any]]) -> dict[str, Any] | None:
    """Runs a non-streamed completion, cancelling it (upstream request, MCP calls, further rounds) when the
    client disconnects. Streams get the same from sse-starlette."""
    result: dict[str, Any] | None = None

    async def watch() -> None:
        while (await raw.receive())["type"] != "http.disconnect":
            continue
        group.cancel_scope.cancel()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(watch)
            try:
                result = await work
            finally:
                group.cancel_scope.cancel()
    except BaseExceptionGroup as failure:  # the work's own error, e.g. a GatewayError for the handler
        if len(failure.exceptions) == 1:
            raise failure.exceptions[0] from None
        raise
    return result


def _trace_mode(header: str | None, settings: Settings) -> TraceMode:
    if header is None:
        return settings.tool_trace
    mode = header.strip().lower()
    if mode not in TRACE_MODES:
        raise InvalidRequest(
            f"X-Toolbridge-Trace must be one of {', '.join(TRACE_MODES)}; got '{header}'.", param="X-Toolbridge-Trace"
        )
    return mode  # type: ignore[return-value]


def _vision_check(settings: Settings, upstream: UpstreamClient, model: str | None) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        if settings.vision == "auto":
            return await upstream.supports_vision(model)
        return settings.vision == "on"

    return check


@router.api_route("/v1/chat/completions", methods=["GET", "PUT", "PATCH", "DELETE"], include_in_schema=False)
async def chat_completions_other_methods(request: Request) -> Response:
    raise MethodNotAllowed(request.method, request.url.path, "POST")


@router.get("/tools")
async def list_tools(pool: PoolDep) -> dict[str, Any]:
    """The tools injected into every request, each with the server and MCP tool it maps to."""
    return {"object": "list", "data": pool.catalogue.describe()}


@router.get("/v1/models")
async def list_models(request: Request, upstream: UpstreamDep) -> Response:
    """The upstream's models, with `context_length` added where LM Studio reports it (Chatbox reads it)."""
    proxied = await upstream.forward("GET", "models", query=request.url.query, headers=request.headers, body=None)
    body = b"".join([part async for part in proxied.body])
    contexts = await upstream.context_lengths() if proxied.status_code == 200 else {}
    return Response(_with_context_lengths(body, contexts), proxied.status_code, headers=proxied.headers)


def _with_context_lengths(body: bytes, contexts: dict[str, int]) -> bytes:
    if not contexts:
        return body
    try:
        models = json.loads(body)
    except ValueError:
        return body
    entries = models.get("data") if isinstance(models, dict) else None
    if not isinstance(entries, list):
        return body
    for entry in entries:
        if isinstance(entry, dict) and entry.get("id") in contexts and "context_length" not in entry:
            entry["context_length"] = contexts[entry["id"]]
    return json.dumps(models).encode()


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


@router.get("/metrics", include_in_schema=False)
async def metrics(collected: MetricsDep) -> Response:
    """Prometheus text format; behind the API key unless TOOLBRIDGE_METRICS_PUBLIC (app/api/guard.py)."""
    return Response(collected.render(), media_type=METRICS_CONTENT_TYPE)


@router.get("/health")
async def health(
    pool: PoolDep, upstream: UpstreamDep, authorised: AuthorisedDep, settings: SettingsDep
) -> dict[str, Any]:
    """The whole picture for callers with a key (or when no keys are set); only the status for others:
    servers' errors carry their stderr, which may hold what users sent them or what the operator set."""
    config = pool.config
    status = "degraded" if pool.degraded or not config.found else "ok"
    if not authorised:
        return {"status": status}
    servers = pool.health()
    body: dict[str, Any] = {
        "status": status,
        "upstream": {"url": upstream.base_url, "kind": await upstream.server_kind(),
                     "schema_profile": resolve_profile(settings.schema_profile, settings.upstream_base)},
        "servers": servers,
        "tools": len(pool.catalogue.openai_tools),
        "mcp_config": {
            "path": str(config.path),
            "found": config.found,
            "files": [{"path": str(path), "found": found} for path, found in config.files],
        },
    }
    if not config.found:
        body["mcp_config"]["note"] = "file not found: no MCP tools are offered"
    return body
