"""structlog setup, and the record of each request when it ends: its log line (status, duration, rounds, tools
called, tokens) and its metrics."""

import logging
import os
import re
import sys
import time
from collections.abc import Iterable
from typing import Any

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.metrics import Metrics
from app.open_webui import OPENWEBUI_PREFIX, openwebui_fields
from app.ports import RequestStats
from app.shown import ROUTE as IMAGES_ROUTE

log = structlog.get_logger("toolbridge.http")

# One value in a log line is cut past this many characters: an error must not write thousands of lines.
MAX_FIELD_CHARS = 8_000
REDACTED = "[redacted]"
# Credentials whatever they are: bearer tokens and key-like headers, in any log line.
_CREDENTIAL = re.compile(
    r"(?i)(bearer\s+|(?:x-api-key|api-key|api_key|authorization)['\"]?\s*[:=]\s*['\"]?(?:bearer\s+)?)[^\s'\",}]+"
)


def configure_logging(log_format: str, level: str, secrets: Iterable[str] = ()) -> None:
    """Routes structlog and stdlib logging (uvicorn, mcp) through one renderer on stderr.

    Tracebacks are plain, without local variables (those hold keys, and rendering them with `rich`
    took seconds on the event loop); every value is bounded; `secrets` and anything that looks like a
    credential are replaced in the finished line, whatever wrote them."""
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any = (
        _chain(structlog.processors.format_exc_info, _bounded, structlog.processors.JSONRenderer())
        if log_format == "json"
        else _chain(
            _bounded,
            structlog.dev.ConsoleRenderer(
                colors=sys.stderr.isatty(), exception_formatter=structlog.dev.plain_traceback
            ),
        )
    )
    renderer = _redacting(renderer, secrets)
    structlog.configure(
        # Below the level, an event is dropped before it is stamped and merged (1.5 % of a chat's time).
        processors=[structlog.stdlib.filter_by_level, *shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # uvicorn's own access log repeats our request line without the tool figures.
    logging.getLogger("uvicorn.access").disabled = True
    for noisy in ("httpx", "httpcore", "httpx2", "httpcore2"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    # At debug it logs every SSE chunk it sends: the whole of every answer.
    logging.getLogger("sse_starlette").setLevel(max(logging.INFO, root.level))


def _chain(*processors: Any) -> Any:
    def run(logger: Any, method: str, event: Any) -> Any:
        for processor in processors:
            event = processor(logger, method, event)
        return event

    return run


def _bounded(_logger: Any, _method: str, event: dict[str, Any]) -> dict[str, Any]:
    for key, value in event.items():
        if isinstance(value, str) and len(value) > MAX_FIELD_CHARS:
            event[key] = f"{value[:MAX_FIELD_CHARS]}... ({len(value) - MAX_FIELD_CHARS} more characters)"
    return event


def _redacting(renderer: Any, secrets: Iterable[str]) -> Any:
    known = sorted({s for s in secrets if s}, key=len, reverse=True)
    exact = re.compile("|".join(re.escape(s) for s in known)) if known else None

    def render(logger: Any, method: str, event: dict[str, Any]) -> Any:
        line = renderer(logger, method, event)
        if isinstance(line, str):
            line = _CREDENTIAL.sub(lambda m: m.group(1) + REDACTED, line)
            if exact is not None:
                line = exact.sub(REDACTED, line)
        return line

    return render


def _logged_path(path: str) -> str:
    """The path, less an image's id: that is the image's key (app/images.py), and logs outlive it."""
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

        client_fields = openwebui_fields({name.decode("latin-1"): value.decode("latin-1")
                                          for name, value in scope["headers"] if name.startswith(OPENWEBUI_PREFIX)})
        structlog.contextvars.bind_contextvars(request_id=request_id, **client_fields)
        try:
            await self.app(scope, receive, send_with_status)
        finally:
            fields: dict[str, Any] = {
                **client_fields,
                "method": scope["method"],
                "path": _logged_path(scope["path"]),
                "status": status,
                "duration_ms": round((time.perf_counter() - started) * 1000, 1),
            }
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
                usage = stats.usage
                fields |= {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens}
            if metrics is not None:
                metrics.in_flight.dec()
                route = getattr(scope.get("route"), "path", None) or "unmatched"  # a template: bounded labels
                metrics.observe_request(route, scope["method"], status, time.perf_counter() - started)
                if stats.usage is not None:
                    metrics.observe_tokens(stats.usage.prompt_tokens, stats.usage.completion_tokens)
            # Health probes (Docker, compose) every few seconds would drown the real traffic.
            level = logging.DEBUG if scope["path"] == "/health" else logging.INFO
            log.log(level, "request", **fields)
            structlog.contextvars.clear_contextvars()
