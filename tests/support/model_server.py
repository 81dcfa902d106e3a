"""The scripted upstream on a port of its own, stopped and started again as a person quits and starts LM Studio:
for what clients and people see while the model server is down (tests of issue 45)."""

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.support.fake_upstream import FakeUpstream, Turn
from tests.support.servers import ServerThread, free_port


class ModelServer(FakeUpstream):
    """A FakeUpstream (LM Studio's REST API included) at `base`; `stop()` and `start()` on the same port. With
    `refuse`, its model list is a 401, as with a wrong TOOLBRIDGE_UPSTREAM_API_KEY."""

    def __init__(self, default: Callable[[dict[str, Any]], Turn] | None = None) -> None:
        super().__init__(default=default)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}/v1"
        self.refuse = False
        self._thread: ServerThread | None = None

    async def models(self, request: Request) -> Response:
        if self.refuse:
            return JSONResponse({"error": {"message": "Invalid API key", "type": "invalid_request_error"}}, 401)
        return await super().models(request)

    def start(self) -> "ModelServer":
        self._thread = ServerThread(self.app, self.port).__enter__()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._thread.__exit__(None, None, None)
            self._thread = None
