"""Run an ASGI app on a free 127.0.0.1 port in a background thread, with a bounded start and stop."""

import socket
import threading
import time
from types import TracebackType
from typing import Any, Self

import uvicorn

START_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerThread:
    """uvicorn in a thread: real sockets, real HTTP, its own event loop."""

    def __init__(self, app: Any, port: int | None = None) -> None:
        self.port = port or free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_config=None, lifespan="on")
        self.server = uvicorn.Server(config)
        self.server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
        self._thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Self:
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"server on port {self.port} did not start")
            time.sleep(0.01)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=30)
        if self._thread.is_alive():
            raise RuntimeError(f"server on port {self.port} did not stop within 30 s")
