"""Run an ASGI app on a free 127.0.0.1 port in a background thread, with a bounded start and stop."""

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any, Self

import uvicorn

START_TIMEOUT = 30.0


def free_port() -> int:
    """A port free now, for a process started later (a subprocess's --port); another may take it meanwhile, so a
    server of this process binds a socket at once instead (`bound_socket`)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def bound_socket(port: int = 0, host: str = "127.0.0.1") -> socket.socket:
    """A loopback socket bound now (to a free port by default): nothing else can take its port before the server
    that uses it starts, as with `free_port` under parallel test workers."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


class ServerThread:
    """uvicorn in a thread: real sockets, real HTTP, its own event loop."""

    def __init__(self, app: Any, port: int | None = None, *, sock: socket.socket | None = None,
                 host: str = "127.0.0.1", **options: Any) -> None:
        """`sock`: a socket bound already (`bound_socket`), whose port the app's own URLs may name; else one is bound
        now, on `host` to `port` or a free one. `options`: uvicorn's, such as ssl_certfile and ssl_keyfile."""
        self._sock = sock if sock is not None else bound_socket(port or 0, host)
        self.port = self._sock.getsockname()[1]
        self.scheme = "https" if options.get("ssl_certfile") else "http"
        config = uvicorn.Config(app, host=host, port=self.port, log_config=None, lifespan="on", **options)
        self.server = uvicorn.Server(config)
        self.server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

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
        self._sock.close()
        if self._thread.is_alive():
            raise RuntimeError(f"server on port {self.port} did not stop within 30 s")


@contextmanager
def raw_upstream(on_connection: Callable[[socket.socket], None]) -> Iterator[str]:
    """A TCP listener on a free loopback port that hands each connection to `on_connection` (which may keep
    it open by returning without closing it); yields an upstream base URL. Every connection is closed at
    the end."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.1)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection = listener.accept()[0]
            except TimeoutError:
                continue
            accepted.append(connection)
            on_connection(connection)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stop.set()
        thread.join(timeout=5)
        for connection in accepted:
            connection.close()
        listener.close()


def read_request(connection: socket.socket) -> None:
    """Reads one request whole: closing a socket with unread bytes resets the connection instead."""
    connection.settimeout(5)
    data = b""
    while b"\r\n\r\n" not in data:
        data += connection.recv(65536) or b"\r\n\r\n"
    head, _, body = data.partition(b"\r\n\r\n")
    lengths = [int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
    length = lengths[0] if lengths else 0
    while len(body) < length:
        body += connection.recv(65536) or b"x" * length


HEAD_SSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


@contextmanager
def dying_upstream(start: bytes, head: bytes = HEAD_SSE) -> Iterator[str]:
    """A model server that dies mid-answer: to each request it sends `head`, then `start` (as one chunk of a
    chunked body when the head says so, else as it is), then closes the connection. Yields its base URL."""
    body = f"{len(start):x}\r\n".encode() + start + b"\r\n" if b"chunked" in head else start

    def die(connection: socket.socket) -> None:
        with contextlib.suppress(OSError):
            read_request(connection)
            connection.sendall(head + body)
        connection.close()

    with raw_upstream(die) as url:
        yield url
