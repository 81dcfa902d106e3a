"""The HTTP server toolbridge runs: uvicorn, with the two bounds its httptools protocol lacks.

uvicorn waits for a request head as long as a client likes to send it, and accepts a head of any size
(measured: a 1 MB header served, a half-sent head held for minutes). Here a head must arrive within the
client timeout and fit in MAX_HEAD_BYTES; otherwise the client gets a 408 or 431 envelope and the
connection is closed. Bodies are bounded later, by `api/guard.py`. At shutdown, a request still answering
is told at once (ON_SHUTDOWN), so that a stream can end properly before the grace runs out; and a shutdown that
ended cleanly exits 0 (CleanStopServer).
"""

import asyncio
import json
from collections.abc import Callable, Generator
from contextlib import contextmanager
from typing import cast

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEAD_BYTES = 64 * 1024  # request line and headers; nginx's default allows 32 KiB
# Scope key: a callable the app leaves for a request still answering, called when the server starts shutting
# down (uvicorn tells the connection, not the app, until the grace is over and it cancels the request).
ON_SHUTDOWN = "toolbridge.on_shutdown"


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with a head that must come within `head_timeout` s and MAX_HEAD_BYTES, and
    a request still answering told when the server starts shutting down (ON_SHUTDOWN)."""

    head_timeout: float  # seconds; each server's own, set by bounded_protocol
    _head_timer: asyncio.TimerHandle | None = None
    _head_bytes = 0
    _head_tail = b""  # the last bytes of the head so far, for an end split across segments

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()  # a connection that never sends a byte is a head that never comes

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._head_timer is None:  # the next request on a kept-alive connection
            self._await_head()

    def data_received(self, data: bytes) -> None:
        if self.transport.is_closing():
            return
        if self._head_timer is not None:  # count the head only: a body often comes in the same segment
            self._head_bytes += self._head_part(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._refuse(431, "request_header_too_large",
                             f"The request line and headers are larger than {MAX_HEAD_BYTES} bytes.")
                return
        super().data_received(data)

    def _head_part(self, data: bytes) -> int:
        """How many bytes of `data` belong to the head. Its end (CRLF CRLF) may be split across segments
        (`...\r\n\r`, then `\n` and the body): the last bytes of the previous segment are searched too."""
        tail = self._head_tail
        if tail and (joint := (tail + data[:3]).find(b"\r\n\r\n")) >= 0:
            return joint + 4 - len(tail)
        end = data.find(b"\r\n\r\n")
        if end >= 0:
            return end + 4
        self._head_tail = (tail + data)[-3:] if len(data) < 3 else data[-3:]
        return len(data)

    def on_headers_complete(self) -> None:
        self._head_arrived()
        super().on_headers_complete()

    def shutdown(self) -> None:
        if self.cycle is not None and not self.cycle.response_complete:
            # routes.py puts a callable there; uvicorn's scope type knows only the ASGI keys
            notify = cast(Callable[[], None] | None, self.scope.get(ON_SHUTDOWN))
            if notify is not None:
                notify()
        super().shutdown()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_arrived()
        super().connection_lost(exc)

    def _unsupported_upgrade_warning(self) -> None:
        # uvicorn adds, with no WebSocket protocol set, "install websockets": the gateway serves none (app/cli.py,
        # ws="none"), so that would send the operator after a library that changes nothing. The request is served.
        self.logger.warning("Unsupported upgrade request.")

    def _await_head(self) -> None:
        self._head_bytes = 0
        self._head_tail = b""
        self._head_timer = self.loop.call_later(self.head_timeout, self._head_too_slow)

    def _head_arrived(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        answering = self.cycle is not None and not self.cycle.response_complete  # a pipelined head: wait
        if not self.transport.is_closing() and not answering:
            self._refuse(408, "request_timeout", f"The request head did not arrive within {self.head_timeout:g} s.")

    def _refuse(self, status: int, code: str, message: str) -> None:
        self._head_arrived()
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                     "code": code}}).encode()
        reason = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}[status]
        # The same head is as large the next time: the Stainless SDKs would send it again (app/openai/errors.py).
        retry = b"x-should-retry: false\r\n" if status == 431 else b""
        self.transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%sconnection: close\r\n\r\n"
            % (status, reason, len(body), retry) + body
        )
        self.transport.close()


def bounded_protocol(head_timeout: float) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol, with a head that must come within `head_timeout` s and MAX_HEAD_BYTES."""
    # uvicorn makes a protocol of a class for each connection, so the timeout is the class's own.
    protocol = type(BoundedHttpToolsProtocol.__name__, (BoundedHttpToolsProtocol,), {"head_timeout": head_timeout})
    return cast(type[BoundedHttpToolsProtocol], protocol)


class CleanStopServer(uvicorn.Server):
    """uvicorn's server, which exits 0 once SIGTERM or Ctrl-C has stopped it cleanly. uvicorn raises the signal
    again after its shutdown, for a parent that wants to see it: the process then dies of it, and tini reports
    143, so every `docker stop` looked like a failure (`Exited (143)`, Kubernetes' `Error`, `restart:
    on-failure` restarting). A stop that was not clean still says so: a second signal's forced exit dies of the
    signal as before, and an exception is an exception."""

    @contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        with super().capture_signals():
            yield
            if not self.force_exit:
                self._captured_signals.clear()  # what uvicorn would raise again as it leaves
