"""structlog setup and the per-request log line (status, duration, rounds, tools called)."""

import logging
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.clients import openwebui_fields

log = structlog.get_logger("toolbridge.http")


def configure_logging(log_format: str, level: str) -> None:
    """Routes structlog and stdlib logging (uvicorn, mcp) through one renderer on stderr."""
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if log_format == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
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


@dataclass
class RequestStats:
    """Filled in by the tool loop while a request runs; read by the request log line at its end."""

    rounds: int = 0
    tools_called: list[str] = field(default_factory=list)


class RequestLogMiddleware:
    """Pure ASGI middleware: binds a request id and logs one line per HTTP request when it ends.

    Pure ASGI rather than BaseHTTPMiddleware so streaming bodies are not buffered and the line is
    written after the last byte of a stream.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = f"req_{uuid.uuid4().hex[:16]}"
        stats = RequestStats()
        scope.setdefault("state", {})["request_stats"] = stats
        status = 500
        started = time.perf_counter()

        async def send_with_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", []).append((b"x-request-id", request_id.encode()))
            await send(message)

        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        client_fields = openwebui_fields(headers)
        structlog.contextvars.bind_contextvars(request_id=request_id, **client_fields)
        try:
            await self.app(scope, receive, send_with_status)
        finally:
            fields: dict[str, Any] = {
                **client_fields,
                "method": scope["method"],
                "path": scope["path"],
                "status": status,
                "duration_ms": round((time.perf_counter() - started) * 1000, 1),
            }
            if stats.rounds:
                fields |= {"rounds": stats.rounds, "tools_called": stats.tools_called}
            # Health probes (Docker, compose) every few seconds would drown the real traffic.
            level = logging.DEBUG if scope["path"] == "/health" else logging.INFO
            log.log(level, "request", **fields)
            structlog.contextvars.clear_contextvars()
