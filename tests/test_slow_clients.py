"""Issue 27, N10: clients that hold a connection open cannot take the request slots chats need.

Status pages keep /ui/events open as long as they are shown; a body dripped a byte at a time never stalled
long enough for a per-part deadline. Over real HTTP, with TOOLBRIDGE_MAX_CONCURRENT_REQUESTS small.
"""

import contextlib
import json
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from app.api.guard import MAX_STATUS_STREAMS
from tests.conftest import running_gateway
from tests.support.fake_upstream import FakeUpstream, Turn

ASK = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
HANG_GUARD = 15.0


@contextlib.contextmanager
def status_streams(url: str, count: int) -> Iterator[list[int]]:
    """`count` /ui/events streams held open (each has sent its first event); yields their statuses."""
    with contextlib.ExitStack() as stack:
        client = stack.enter_context(httpx.Client(timeout=HANG_GUARD, limits=httpx.Limits(max_connections=None)))
        statuses, readers = [], []  # a reader dropped would close its connection
        for _ in range(count):
            response = stack.enter_context(client.stream("GET", f"{url}/ui/events"))
            statuses.append(response.status_code)
            if response.status_code == 200:
                readers.append(response.iter_lines())
                next(readers[-1])  # `event: servers`: the stream is being served
        yield statuses


def test_status_pages_do_not_take_the_slots_chats_need(tmp_path: Path, upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="still answered"))
    with (running_gateway(tmp_path, upstream_url=f"{upstream.url}/v1", max_concurrent_requests=4) as gateway,
          status_streams(gateway.url, 4)):
        answer = httpx.post(f"{gateway.url}/v1/chat/completions", json=ASK, timeout=HANG_GUARD)
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"] == "still answered"


def test_status_streams_have_their_own_bound(tmp_path: Path, upstream: FakeUpstream) -> None:
    with running_gateway(tmp_path, upstream_url=f"{upstream.url}/v1") as gateway:
        with status_streams(gateway.url, MAX_STATUS_STREAMS + 1) as statuses:
            assert statuses == [200] * MAX_STATUS_STREAMS + [503]
        with status_streams(gateway.url, 1) as statuses:  # closed streams give their place back
            assert statuses == [200]


def test_a_body_dripped_a_byte_at_a_time_gets_a_408_within_the_client_timeout(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    """One byte every 0.2 s, never a pause of TOOLBRIDGE_CLIENT_TIMEOUT (1 s): the whole body must come within
    it. Until then it holds the only slot; after the 408 a chat gets it."""
    upstream.script(Turn(content="next"))
    with running_gateway(tmp_path, upstream_url=f"{upstream.url}/v1", client_timeout=1,
                         max_concurrent_requests=1) as gateway:
        port = gateway.thread.port
        head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n").encode()
        with socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD) as sock:
            sock.sendall(head)
            started = time.monotonic()
            while not select.select([sock], [], [], 0.2)[0]:  # answered yet? else one more byte
                assert time.monotonic() - started < HANG_GUARD, "the dripping body was never refused"
                sock.sendall(b" ")
            answer = sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "request_timeout"
        chat = httpx.post(f"{gateway.url}/v1/chat/completions", json=ASK, timeout=HANG_GUARD)
        assert chat.status_code == 200, chat.text
