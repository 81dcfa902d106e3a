"""Slots held by slow and leaving clients (issue 27's N10, issue 9's audit): clients that hold a connection open
cannot take the request slots chats need, and clients that leave give theirs back.

Status pages keep /ui/events open as long as they are shown; a body dripped a byte at a time never stalled
long enough for a per-part deadline; a body never finished; more requests than slots; streams abandoned
mid-answer. Over real HTTP, with TOOLBRIDGE_MAX_CONCURRENT_REQUESTS small.
"""

import contextlib
import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import psutil

from app.api.guard import MAX_STATUS_STREAMS
from tests.conftest import running_gateway
from tests.security.conftest import gateway_at
from tests.support.fake_upstream import FakeUpstream, Turn
from tests.support.raw_http import RAW_TIMEOUT, chat_head, send_head

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


def test_a_client_that_stops_sending_its_body_gets_a_408(tmp_path: Path, upstream: FakeUpstream) -> None:
    upstream.script()
    with gateway_at(tmp_path, f"{upstream.url}/v1", client_timeout=0.5) as gateway:
        status, body = send_head(gateway.thread.port, chat_head(gateway.thread.port, 100), b"{}")
    assert status == 408
    assert body["error"]["code"] == "request_timeout"
    assert upstream.requests == []


def test_too_many_requests_at_once_get_a_503_with_retry_after(tmp_path: Path, upstream: FakeUpstream) -> None:
    release, closed = threading.Event(), threading.Event()
    upstream.script(Turn(content="first and second", hold_after_first_content=release, closed=closed))
    with gateway_at(tmp_path, f"{upstream.url}/v1", max_concurrent_requests=1) as gateway:
        client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="x", max_retries=0)
        stream = client.chat.completions.create(model="m", messages=ASK["messages"], stream=True)
        first = next(iter(stream))  # the first request is in flight, held by the upstream
        assert first.choices[0].delta.role == "assistant"
        refused = httpx.post(f"{gateway.url}/v1/chat/completions", json=ASK)
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "1"
        assert refused.json()["error"]["code"] == "overloaded"
        assert httpx.get(f"{gateway.url}/health").status_code == 200  # health checks are never refused
        release.set()
        assert "".join(c.choices[0].delta.content or "" for c in stream) == "first and second"
    assert closed.wait(RAW_TIMEOUT)


def test_clients_that_leave_mid_stream_leak_no_slot_thread_or_descriptor(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    """100 streams abandoned mid-answer, with a cap of 4 requests at once: every slot comes back (a leaked one
    would soon refuse everybody), and the process keeps its threads and file descriptors."""
    me = psutil.Process()
    with gateway_at(tmp_path, f"{upstream.url}/v1", max_concurrent_requests=4) as gateway:
        def abandon_one() -> None:
            release, closed = threading.Event(), threading.Event()
            upstream.script(Turn(content="never read to the end", hold_after_first_content=release, closed=closed))
            with httpx.stream("POST", f"{gateway.url}/v1/chat/completions", timeout=RAW_TIMEOUT,
                              json={**ASK, "stream": True}) as response:
                assert response.status_code == 200
                next(response.iter_lines())
            assert closed.wait(RAW_TIMEOUT)  # the gateway hung up on the upstream when the client left
            release.set()  # ends the fake upstream's own waiting thread

        for _ in range(10):  # warm-up: pools and lazily started threads reach their size
            abandon_one()
        threads, descriptors = me.num_threads(), me.num_fds()
        for _ in range(100):
            abandon_one()
        scraped = httpx.get(f"{gateway.url}/metrics").text
        assert "toolbridge_requests_in_flight 1.0" in scraped  # only the scrape itself
        assert me.num_threads() <= threads + 2
        assert me.num_fds() <= descriptors + 10
