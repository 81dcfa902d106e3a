"""Issue 27's edge cases, measured on a gateway served as `toolbridge` serves it (uvicorn with app/serving.py's
protocol), in this process, on free loopback ports. Prints one line per figure.

    .venv/bin/python -m bench.slow_clients

- null-origin text/plain POSTs (N5): the status each route answers.
- four /ui/events streams open with TOOLBRIDGE_MAX_CONCURRENT_REQUESTS=4 (N10): the status of a chat.
- a body dripped one byte every 0.25 s with TOOLBRIDGE_CLIENT_TIMEOUT=2 (N10): how long it holds its slot.
- a head whose CRLFCRLF is split across two segments, then 70 KB of body (N18): the status.
- the cost per streamed chunk of ending streams at shutdown (N15), when the module has it.
"""

import asyncio
import select
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from app.main import create_app
from app.serving import bounded_protocol
from app.settings import Settings
from tests.support.fake_upstream import FakeUpstream, Turn
from tests.support.servers import ServerThread, free_port

DRIP_CAP = 20.0
FIGURES: list[str] = []  # printed at the end, after the gateway's own log lines


def report(line: str) -> None:
    FIGURES.append(line)


class Served:
    def __init__(self, **overrides: Any) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        settings = Settings.load(_env_file=None, mcp_config=Path(self.tmp.name) / "none.json",
                                 state_url="memory://", **overrides)
        self.port = free_port()
        config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=self.port, log_config=None,
                                access_log=False, http=bounded_protocol(settings.server.client_timeout))
        self.server = uvicorn.Server(config)
        self.server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.tmp.cleanup()


def null_origin_posts(upstream: str) -> None:
    with Served(upstream_url=upstream) as url:
        headers = {"Origin": "null", "Content-Type": "text/plain;charset=UTF-8"}
        for path in ("/ui/playground", "/ui/servers/x/restart", "/v1/chat/completions", "/v1/models/unload"):
            body = b'{"tool": "x", "arguments": {}}' if path == "/ui/playground" else b'{"model": "m"}'
            answer = httpx.post(url + path, content=body, headers=headers)
            try:
                code = answer.json()["error"]["code"]
            except (ValueError, KeyError, TypeError):  # an answer from the route or the upstream
                code = "(reached the route)"
            report(f"N5  null-origin text/plain POST {path}: {answer.status_code} {code}")


def chat_beside_status_pages(upstream: str, fake: FakeUpstream) -> None:
    fake.script(Turn(content="hi"))
    with Served(upstream_url=upstream, max_concurrent_requests=4) as url, httpx.Client(timeout=10) as client:
        streams = [client.stream("GET", f"{url}/ui/events") for _ in range(4)]
        readers = []
        for stream in streams:
            readers.append(stream.__enter__().iter_lines())
            next(readers[-1])
        status = httpx.post(f"{url}/v1/chat/completions", timeout=10,
                            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}).status_code
        report(f"N10 chat with 4 /ui/events open, limit 4: {status}")
        for stream in streams:
            stream.__exit__(None, None, None)


def dripped_body(upstream: str) -> None:
    with Served(upstream_url=upstream, client_timeout=2) as url:
        port = int(url.rsplit(":", 1)[1])
        head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n").encode()
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(head)
            started = time.monotonic()
            while not select.select([sock], [], [], 0.25)[0] and time.monotonic() - started < DRIP_CAP:
                sock.sendall(b" ")
            held = time.monotonic() - started
            answer = (sock.recv(200).split(b"\r\n", 1)[0].decode() if held < DRIP_CAP
                      else f"none (gave up at {DRIP_CAP:g} s)")
        report(f"N10 body dripped 1 byte / 0.25 s, client timeout 2 s: slot held {held:.1f} s, answer: {answer}")


def split_head(upstream: str) -> None:
    with Served(upstream_url=upstream) as url:
        port = int(url.rsplit(":", 1)[1])
        body = b"x" * 70_000
        head = (b"POST /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body))
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(head[:-1])
            time.sleep(0.3)
            sock.sendall(head[-1:] + body)
            report(f"N18 head end split across segments + 70 KB body: {sock.recv(200).split(b' ', 2)[1].decode()}"
                  " (405 = read whole; 431 = body counted as head)")


def cutoff_cost() -> None:
    try:
        from app.chat.answer.streaming import ShutdownCutoff, chat_cut_off
    except ImportError:
        report("N15 per-chunk cost of the shutdown cut-off: (not in this version)")
        return

    async def payloads(n: int) -> Any:
        for i in range(n):
            yield {"i": i}

    async def run() -> tuple[float, float]:
        n = 200_000
        started = time.perf_counter()
        async for _ in payloads(n):
            pass
        plain = time.perf_counter() - started
        started = time.perf_counter()
        async for _ in ShutdownCutoff(10).payloads(payloads(n), chat_cut_off):
            pass
        return plain / n * 1e6, (time.perf_counter() - started) / n * 1e6

    plain, guarded = asyncio.run(run())
    report(f"N15 per streamed chunk: plain {plain:.2f} µs, with the shutdown cut-off {guarded:.2f} µs "
          f"(+{guarded - plain:.2f} µs)")


def main() -> None:
    fake = FakeUpstream()
    with ServerThread(fake.app) as thread:
        upstream = f"{thread.url}/v1"
        null_origin_posts(upstream)
        chat_beside_status_pages(upstream, fake)
        dripped_body(upstream)
        split_head(upstream)
    cutoff_cost()
    print("\n".join(FIGURES))


if __name__ == "__main__":
    main()
