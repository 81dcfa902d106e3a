"""HTTP in and out beside the doors (app/doors/): pass-through of the rest of /v1, health, and the lists of tools,
prompts and resources."""

from typing import Annotated, Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import Response, StreamingResponse
from starlette.background import BackgroundTask

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
from app.api.doors import read_body
from app.api.health import health_report
from app.chat import (
    IMAGES_ROUTE,
    TOOLS_HEADER,
    StoredImage,
    ToolListing,
    Turn,
    choose_tools,
    describe_offer,
    describe_request,
    ranked,
    tool_budget_for,
    with_virtual_models,
)
from app.chat import request_loop_options as loop_options
from app.doors.messages.models import ANTHROPIC_VERSION_HEADER, anthropic_model_list
from app.openai.errors import Forbidden, RouteNotFound
from app.ops.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE

# Who may call what is decided before any route runs (app/api/guard.py).
router = APIRouter()


@router.get("/tools", response_model=None)  # ToolListing: sent as built, not re-validated
async def list_tools(
    pool: ViewDep, settings: SettingsDep, upstream: UpstreamDep, model: str | None = None, q: str | None = None,
    tools_header: Annotated[str | None, Header(alias=TOOLS_HEADER)] = None,
) -> ToolListing:
    """The MCP tools a request is offered (for `model`, a virtual one naming a toolset, and the tools header
    when given), each with the server and MCP tool it maps to; with `q`, the text of a user's message, each
    with its relevance and whether the tool budget would offer it."""
    chosen = choose_tools(model, None, tools_header, settings.tools.toolsets, pool.knows)
    selection = chosen.selection
    budget = await tool_budget_for(settings, upstream, chosen.model)
    catalogue = pool.tools_for_request(selection=selection).catalogue
    return await ranked(lambda: describe_offer(catalogue, q, budget))


@router.post("/tools", response_model=None)
async def tools_for_chat(raw: Request, pool: ViewDep, settings: SettingsDep, upstream: UpstreamDep) -> ToolListing:
    """What a chat request with this body is offered: its own tools (`client`, as they would be sent) and the
    MCP tools, each with its relevance and whether the tool budget keeps it; the names withheld, and `why`.
    The body is a chat completion's, checked the same way; nothing is sent upstream. Earlier turns' calls
    that memory would give back are not looked up, so a tool called before may show as withheld here."""
    sent, _ = await read_body(raw, parse_chat_body)
    turn = Turn.from_request(sent, raw.headers)
    chosen = choose_tools(turn.model, sent.get("metadata"), turn.caller.tools, settings.tools.toolsets, pool.knows)
    turn, selection = turn.chosen(chosen), chosen.selection
    client_tools = list(turn.client_tools)
    names = frozenset(str(tool.get("function", {}).get("name")) for tool in client_tools)
    offered = loop_options(settings, turn, upstream, selection).offer_tools
    catalogue = pool.tools_for_request(offered=offered, client_tools=names, selection=selection).catalogue
    budget = await tool_budget_for(settings, upstream, turn.model)
    return await ranked(lambda: describe_request(catalogue, list(turn.messages), client_tools, budget))


@router.get("/prompts")
async def list_prompts(
    pool: ViewDep, settings: SettingsDep, model: str | None = None,
    tools_header: Annotated[str | None, Header(alias=TOOLS_HEADER)] = None,
) -> dict[str, Any]:
    """The MCP servers' prompts, each with the slash command that runs it in chat; for `model` (a virtual one
    naming a toolset) and the tools header when given, those of the servers they choose, as a chat has them."""
    selection = choose_tools(model, None, tools_header, settings.tools.toolsets, pool.knows).selection
    book = pool.prompt_book.select(selection.admits_server)
    return {"object": "list", "data": [entry.describe() for entry in book.listed()]}


@router.get("/resources")
async def list_resources(
    pool: ViewDep, settings: SettingsDep, model: str | None = None,
    tools_header: Annotated[str | None, Header(alias=TOOLS_HEADER)] = None,
) -> dict[str, Any]:
    """Each MCP server's resources and URI templates as last listed, and the tool that reads them; for `model` and
    the tools header, as `/prompts`."""
    selection = choose_tools(model, None, tools_header, settings.tools.toolsets, pool.knows).selection
    return {"object": "list", "data": [{"server": name, **listing} for name, listing in pool.resources().items()
                                       if selection.admits_server(name)]}


@router.get("/v1/models")
async def list_models(request: Request, upstream: UpstreamDep, settings: SettingsDep, pool: ViewDep) -> Response:
    """The upstream's models (the last list it gave while it cannot answer), and a virtual model per toolset of
    which the caller's key may use something; in Anthropic's shape for Anthropic's clients
    (app/doors/messages/models.py)."""
    listed = await upstream.list_models(query=request.url.query, headers=request.headers)
    body = listed.body
    if listed.status == 200:
        usable = {name: members for name, members in settings.tools.toolsets.items()
                  if pool.scope.everything or any(pool.knows(member) for member in members)}
        body = with_virtual_models(body, usable)
        if ANTHROPIC_VERSION_HEADER in request.headers:
            body = anthropic_model_list(body)
    return Response(body, listed.status, headers=listed.headers)


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
    unguessable id that only the answer carries is the key (app/chat/answer/images.py, app/api/guard.py)."""
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
    if not scope.everything and not settings.access.metrics_public:
        raise Forbidden("The metrics name every MCP server: a key of TOOLBRIDGE_API_KEYS reads them.",
                        code="metrics_not_for_this_key")
    return Response(collected.render(), media_type=METRICS_CONTENT_TYPE)


@router.get("/health")
async def health(
    pool: ViewDep, upstream: UpstreamDep, authorised: AuthorisedDep, settings: SettingsDep, memory: MemoryDep,
    keys: KeysDep,
) -> dict[str, Any]:
    return await health_report(pool, upstream, settings, authorised, memory, keys)
