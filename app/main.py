"""create_app(settings): the FastAPI application, its lifespan, routes and one error mapping."""

from collections.abc import Mapping, Sequence
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware

from app import __version__
from app.api.chat_body import with_chat_body_schema
from app.api.chat_lane import ChatLane
from app.api.guard import BODY_FAILURE, AdmissionGuard, BrowserGuard
from app.api.request_log import RequestLogMiddleware
from app.api.routes import router
from app.api.sign_in_routes import router as sign_in_router
from app.api.ui import page_router
from app.api.ui import router as ui_router
from app.doors.chat_completions.routes import CHAT_PATH, chat_completions
from app.doors.door import Door, door_for
from app.doors.registry import DOORS
from app.lifespan import build_lifespan, key_ring
from app.openai.errors import SHOULD_RETRY, GatewayError, InvalidRequest, RouteNotFound
from app.settings import Settings
from app.upstream import Transport

log = structlog.get_logger("toolbridge.app")


def create_app(settings: Settings, *, upstream_transport: Transport | None = None,
               doors: Sequence[Door] = DOORS) -> FastAPI:
    """The gateway app. `upstream_transport` swaps the upstream HTTP transport (tests, faster stacks); `doors`, the
    front doors it serves (app/doors/registry.py), the first answering for every path no door owns.

    Raises:
        KeysFileError: TOOLBRIDGE_KEYS_FILE names a file that cannot be used.
    """
    keys = key_ring(settings.access, settings.tools.toolsets)
    app = FastAPI(
        title="toolbridge",
        version=__version__,
        lifespan=build_lifespan(settings, keys, upstream_transport=upstream_transport),
        docs_url=None,
        redoc_url=None,
    )
    _mount(app, doors)
    _describe_chat_body(app)
    # Outermost last: the log line sees every answer, refusals included; the browser checks come before CORS
    # headers are granted; the key is checked before a byte of the body is read; chats then take their lane.
    app.add_middleware(ChatLane, route=_chat_route(doors), endpoint=chat_completions, handled=_MAPPED,
                       on_error=_mapped_error)
    app.add_middleware(AdmissionGuard, settings=settings, keys=keys)
    if settings.server.browser_origins:
        app.add_middleware(
            CORSMiddleware, allow_origins=settings.server.browser_origins, allow_methods=["*"], allow_headers=["*"],
            expose_headers=["X-Request-Id", "Retry-After", SHOULD_RETRY],
        )
    app.add_middleware(BrowserGuard, settings=settings.server)
    app.add_middleware(RequestLogMiddleware)
    for kind, handler in _HANDLERS:
        app.add_exception_handler(kind, handler)
    app.add_exception_handler(Exception, _unexpected_error)
    return app


def _mount(app: FastAPI, doors: Sequence[Door]) -> None:
    app.state.doors = tuple(doors)  # whose shape an error takes: the guards' refusals read it too
    # The doors first: the pass-through of the rest of /v1 (routes.py) would take their paths.
    for door in doors:
        app.include_router(door.router)
    for routes in (router, ui_router, page_router, sign_in_router):
        app.include_router(routes)


def _chat_route(doors: Sequence[Door]) -> APIRoute:
    return next(route for door in doors for route in door.router.routes
                if isinstance(route, APIRoute) and route.path == CHAT_PATH and "POST" in (route.methods or ()))


def _describe_chat_body(app: FastAPI) -> None:
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:  # FastAPI's own keeps the document it made there
            with_chat_body_schema(generate())
        return app.openapi_schema  # type: ignore[return-value]

    app.openapi = openapi  # type: ignore[method-assign]


async def _gateway_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, GatewayError)
    return JSONResponse(_error_body(request, exc), status_code=exc.status_code, headers=exc.response_headers())


def _error_body(request: Request, error: GatewayError) -> Mapping[str, object]:
    return door_for(request.app.state.doors, request.url.path).error_body(error)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return await _gateway_error(request, _describe_validation(request, exc))


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if isinstance(body_failure := request.scope.get(BODY_FAILURE), GatewayError):
        error: GatewayError = body_failure
    elif exc.status_code == 404:
        error = RouteNotFound(f"Unknown route: {request.method} {request.url.path}")
    else:
        error = InvalidRequest(str(exc.detail)) if exc.status_code < 500 else GatewayError(str(exc.detail))
        error.status_code = exc.status_code
    return await _gateway_error(request, error)


async def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(body_failure := request.scope.get(BODY_FAILURE), GatewayError):
        # A body that broke off or grew too large while a route streamed it on: the client's doing, not ours.
        return await _gateway_error(request, body_failure)
    # boundary: the client gets the envelope, never a traceback; the log gets the traceback. Starlette answers
    # a crash from outside the request log, so the request's id is carried here for the operator to find it.
    request_id = request.scope.get("state", {}).get("request_id")
    log.error("unhandled_error", request_id=request_id, exc_info=exc)
    crash = GatewayError("Internal gateway error; see the gateway log.")
    return JSONResponse(_error_body(request, crash), 500,
                        headers={"x-request-id": request_id} if request_id else None)


_HANDLERS = (
    (GatewayError, _gateway_error),
    (RequestValidationError, _validation_error),
    (StarletteHTTPException, _http_error),
)
_MAPPED = tuple(kind for kind, _handler in _HANDLERS)


async def _mapped_error(request: Request, exc: Exception) -> JSONResponse:
    """What the exception middleware would answer for `exc` (one of _MAPPED): for the chat lane."""
    return await next(handler for kind, handler in _HANDLERS if isinstance(exc, kind))(request, exc)


def _describe_validation(request: Request, exc: RequestValidationError) -> InvalidRequest:
    first = exc.errors()[0] if exc.errors() else {}
    location = [str(part) for part in first.get("loc", ()) if part != "body"]
    param = ".".join(location) or None
    kind = first.get("type", "")
    if kind == "json_invalid":
        return InvalidRequest(f"The request body is not valid JSON: {first.get('ctx', {}).get('error', '')}".strip())
    content_type = request.headers.get("content-type", "")
    if not location and "json" not in content_type:
        return InvalidRequest(
            "The request body must be JSON: send the header 'Content-Type: application/json'.",
            code="invalid_content_type",
        )
    if kind == "missing":
        return InvalidRequest(f"Missing required parameter: '{param}'.", param=param, code="missing_required_parameter")
    return InvalidRequest(f"Invalid value for '{param or 'body'}': {first.get('msg', 'invalid')}.", param=param)
