"""Ollama's API's door (`/api/chat`, `/api/tags`, `/api/show`, `/api/version`, `/api/ps`): its chat answered by
the tool loop, its model list made of the upstream's; every other `/api/*` path is refused in Ollama's shape
(the upstream is a Chat Completions server: pulling, creating or embedding through Ollama's API is not served).
The translation is in app/doors/ollama_*.py."""

from collections.abc import Mapping

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.api.deps import SettingsDep, UpstreamDep, ViewDep
from app.api.doors import read_json_object, serve_chat
from app.chat import known_context, with_virtual_models
from app.doors.door import FrontDoor
from app.doors.ollama.answer import OllamaExchange, ollama_error_body
from app.doors.ollama.models import listed_models, shown, tags
from app.openai.errors import InvalidRequest, MethodNotAllowed, RouteNotFound, UpstreamError
from app.openai.wire import JSONObject

router = APIRouter()

# The version /api/version reports: Ollama's whose API this door follows (think levels, tool call ids, the
# NDJSON stream). Clients compare it with a minimum (Open WebUI shows it; others refuse an old server), so it
# is new enough for them without claiming the endpoints of later versions.
OLLAMA_VERSION = "0.12.0"
_SERVED = {"/api/chat": "POST", "/api/show": "POST", "/api/tags": "GET", "/api/version": "GET", "/api/ps": "GET"}


@router.post("/api/chat")
async def chat(raw: Request) -> Response:
    """The chat service's answer to Ollama's chat request, streamed as NDJSON (Ollama's default) or whole."""
    return await serve_chat(raw, DOOR)


@router.get("/api/tags")
async def list_tags(raw: Request, upstream: UpstreamDep, settings: SettingsDep, pool: ViewDep) -> Mapping[str, object]:
    """The upstream's models, and a virtual model per toolset the caller's key may use, in Ollama's shape."""
    return tags(await _models(raw, upstream, settings, pool))


@router.post("/api/show")
async def show(raw: Request, upstream: UpstreamDep, settings: SettingsDep, pool: ViewDep) -> Mapping[str, object]:
    """What clients read of one model: its details, context length when known, and capabilities."""
    body = await read_json_object(raw, _json_object)
    name = body.get("model") or body.get("name")  # `name` is the field's older spelling, still sent by some
    if not isinstance(name, str) or not name:
        raise InvalidRequest("`model` is required: the name of a model of GET /api/tags.", param="model")
    entry = next((entry for entry in await _models(raw, upstream, settings, pool) if entry["id"] == name), None)
    if entry is None:
        raise RouteNotFound(f"model '{name}' not found", code="model_not_found")
    context = await known_context(settings, upstream, name) or entry.get("context_length")
    return shown(entry, context if isinstance(context, int) else None, await upstream.supports_vision(name))


def _json_object(body: JSONObject) -> JSONObject:
    return body


@router.get("/api/version")
async def version() -> dict[str, str]:
    return {"version": OLLAMA_VERSION}


@router.get("/api/ps")
async def running_models() -> Mapping[str, object]:
    """No model is loaded by this server: the upstream loads its own (Open WebUI asks, for models' expiry)."""
    return {"models": []}


@router.api_route("/api/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"],
                  include_in_schema=False)
async def not_served(raw: Request, path: str) -> Response:
    """Every other path of Ollama's API, in its error shape; a served path asked with another method, a 405."""
    allowed = _SERVED.get(raw.url.path)
    if allowed is not None:
        raise MethodNotAllowed(raw.method, raw.url.path, allowed)
    raise RouteNotFound(f"{raw.url.path} is not served here: toolbridge's Ollama API answers chat "
                        "(/api/chat) and lists models; pulling, creating and embedding are the model server's.")


async def _models(raw: Request, upstream: UpstreamDep, settings: SettingsDep, pool: ViewDep) -> list[JSONObject]:
    """The upstream's model list's entries (the last list it gave while it cannot answer), with the virtual models
    of the toolsets the key may use (as /v1/models gives them)."""
    listed = await upstream.list_models(query="", headers=raw.headers)
    if listed.status != 200:
        raise UpstreamError(f"The model server answered {listed.status} to the list of its models.")
    usable = {name: members for name, members in settings.tools.toolsets.items()
              if pool.scope.everything or any(pool.knows(member) for member in members)}
    return listed_models(with_virtual_models(listed.body, usable))


# Every path under /api/ is this door's: those it does not serve are refused in its shape (not_served).
DOOR = FrontDoor("ollama", ("/api/",), router, ollama_error_body, OllamaExchange.parse)
