"""The chat route's own lane: POST /v1/chat/completions goes from the gateway's middlewares straight to its
handler, past FastAPI's exception middleware, router and request handler.

Those cost about 60 µs of a non-streamed chat that adds about half a millisecond in all (bench/compare.py),
and the chat route uses nothing they do: it resolves no dependencies and reads its own body. The route stays
registered with FastAPI, so the OpenAPI document describes it and a request the lane does not take (another
method, a trailing slash) gets FastAPI's answer. Errors go to the app's own handlers: the envelopes are the
same either way.
"""

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from app.doors.chat_completions.routes import CHAT_PATH

Endpoint = Callable[[Request], Awaitable[Response]]
ErrorHandler = Callable[[Request, Exception], Awaitable[Response]]


class ChatLane:
    """Innermost of the gateway's middlewares: it sees a chat after the guards and the request log did."""

    def __init__(self, app: ASGIApp, route: BaseRoute, endpoint: Endpoint, handled: tuple[type[Exception], ...],
                 on_error: ErrorHandler) -> None:
        self.app = app
        self._route = route
        self._endpoint = endpoint
        self._handled = handled
        self._on_error = on_error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != CHAT_PATH or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        scope["route"] = self._route  # the metrics' label, as the router sets it
        request = Request(scope, receive, send)
        try:
            response = await self._endpoint(request)
        except self._handled as exc:  # what the exception middleware maps; the rest goes on to the outermost
            response = await self._on_error(request, exc)
        await response(scope, receive, send)
