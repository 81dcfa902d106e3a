"""The record of each HTTP request when it ends: its log line (status, duration, rounds, tools called, tokens)
and its metrics."""

import logging
import os
import time

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.chat import IMAGES_ROUTE, OPENWEBUI_PREFIX, RequestStats, openwebui_fields
from app.ops.metrics import Metrics

log = structlog.get_logger("toolbridge.http")
# Logged at debug: health probes (Docker, compose) every few seconds would drown the real traffic.
_PROBED = frozenset({"/health"})


def _logged_path(path: str) -> str:
    """The path, less an image's id: that is the image's key (app/chat/answer/images.py), and logs outlive it."""
    images = f"/{IMAGES_ROUTE}"
    return f"{images}[id]" if path.startswith(images) else path


class RequestLogMiddleware:
    """Pure ASGI middleware: binds a request id, logs one line per HTTP request when it ends, and counts it in
    the app's metrics (found in the lifespan state).

    Pure ASGI rather than BaseHTTPMiddleware so streaming bodies are not buffered and the line is
    written after the last byte of a stream.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = f"req_{os.urandom(8).hex()}"
        stats = RequestStats()
        state = scope.setdefault("state", {})
        state["request_stats"] = stats
        state["request_id"] = request_id  # for the answer to a crash, sent from outside this middleware
        metrics: Metrics | None = state.get("metrics")
        if metrics is not None:
            metrics.in_flight.inc()
        status = 500
        started = time.perf_counter()

        async def send_with_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", []).append((b"x-request-id", request_id.encode()))
            await send(message)

        client_fields = _client_fields(scope)
        structlog.contextvars.bind_contextvars(request_id=request_id, **client_fields)
        try:
            await self.app(scope, receive, send_with_status)
        finally:
            fields: dict[str, object] = {  # the log line's, passed on to structlog
                **client_fields,
                "method": scope["method"],
                "path": _logged_path(scope["path"]),
                "status": status,
                "duration_ms": round((time.perf_counter() - started) * 1000, 1),
                **_stats_fields(stats),
            }
            if metrics is not None:
                _observe(metrics, scope, status, time.perf_counter() - started, stats)
            log.log(logging.DEBUG if scope["path"] in _PROBED else logging.INFO, "request", **fields)
            structlog.contextvars.clear_contextvars()


def _client_fields(scope: Scope) -> dict[str, str]:
    """What Open WebUI's headers say of the user and the chat, for the log line."""
    return openwebui_fields({name.decode("latin-1"): value.decode("latin-1")
                             for name, value in scope["headers"] if name.startswith(OPENWEBUI_PREFIX)})


def _stats_fields(stats: RequestStats) -> dict[str, object]:
    """What the request did, as far as it did anything: rounds, tools, memory, a slash command, tokens."""
    fields: dict[str, object] = {}
    if stats.rounds:
        fields |= {"rounds": stats.rounds, "tools_called": stats.tools_called}
    if stats.tools_offered or stats.tools_withheld:
        fields |= {"tools_offered": stats.tools_offered, "tools_withheld": stats.tools_withheld}
    if stats.restored_turns:
        fields["restored_turns"] = stats.restored_turns
    if stats.prompt:
        fields["prompt"] = stats.prompt
    if stats.answered_by_gateway:
        fields["answered_by_gateway"] = True
    if stats.usage is not None:
        fields |= {"prompt_tokens": stats.usage.prompt_tokens, "completion_tokens": stats.usage.completion_tokens}
    return fields


def _observe(metrics: Metrics, scope: Scope, status: int, seconds: float, stats: RequestStats) -> None:
    """The request in the metrics: no longer in flight, its route, status and duration, its tokens."""
    metrics.in_flight.dec()
    route = getattr(scope.get("route"), "path", None) or "unmatched"  # a template: bounded labels
    metrics.observe_request(route, scope["method"], status, seconds)
    if stats.usage is not None:
        metrics.observe_tokens(stats.usage.prompt_tokens, stats.usage.completion_tokens)
