"""Requests sent exactly as an attacker writes them: `http.client` or a socket, because httpx and the SDK would
clean the very paths and headers an attacker sends as they are. And a host that records what reached it."""

import http.client
import json
import socket
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from tests.conftest import Gateway

RAW_TIMEOUT = 10


def raw(gateway: Gateway, method: str, path: str, headers: dict[str, str] | None = None,
        body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    """One request exactly as given: the path unnormalised, the Host header as chosen."""
    connection = http.client.HTTPConnection("127.0.0.1", gateway.thread.port, timeout=RAW_TIMEOUT)
    try:
        headers = {"Host": f"127.0.0.1:{gateway.thread.port}", **(headers or {})}
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        if body:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body or None)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def envelope(status: int, body: bytes) -> dict[str, Any]:
    error = json.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


def send_head(port: int, head: str, body: bytes = b"") -> tuple[int, dict[str, Any]]:
    """Sends a request head (and maybe part of a body) on a socket, then reads the answer without sending
    the rest: what a gateway that waited for the whole body would never answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=RAW_TIMEOUT) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        received = b""
        while b"\r\n\r\n" not in received or len(received.split(b"\r\n\r\n", 1)[1]) < _length(received):
            part = sock.recv(65536)
            if not part:
                break
            received += part
    status_line, _, rest = received.partition(b"\r\n")
    return int(status_line.split()[1]), json.loads(rest.split(b"\r\n\r\n", 1)[1])


def _length(received: bytes) -> int:
    for line in received.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":")[1])
    return 0


def chat_head(port: int, length: int, *extra: str) -> str:
    lines = ["POST /v1/chat/completions HTTP/1.1", f"Host: 127.0.0.1:{port}", "Content-Type: application/json",
             f"Content-Length: {length}", *extra, ""]
    return "\n".join(lines) + "\n"


class Recorder:
    """Any path, any method: records what reached it. Standing in for a host the attacker wants reached."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, str]]] = []

        async def record(request: Request) -> Response:
            self.seen.append((request.url.path, dict(request.headers)))
            return PlainTextResponse("stolen")

        self.app = Starlette(routes=[Route("/{path:path}", record, methods=["GET", "POST"])])
