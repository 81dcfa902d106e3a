"""The HTTP server `toolbridge` runs (app/serving.py), as a process: request heads split across TCP segments,
answers still running when the shutdown grace runs out (streams: tests/test_cli.py), and the exit status of a
clean stop."""

import json
import signal
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.test_cli import EXIT_TIMEOUT, serving, toolbridge

DRAIN_SECONDS = 0.3  # lets the first segment be read alone; the assertion does not depend on how long it took


def test_a_head_whose_end_is_split_across_segments_is_not_counted_with_the_body(tmp_path: Path) -> None:
    """`...\\r\\n\\r` in one segment, `\\n` and a 70 KB body in the next: the body is not head (it was a 431)."""
    body = b"x" * 70_000
    head = b"POST /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" \
        % len(body)
    with toolbridge(tmp_path, tmp_path / "none.json") as (_gateway, base):
        port = int(base.rsplit(":", 1)[1])
        for split in (len(head) - 1, len(head) - 2, len(head) - 3):
            with socket.create_connection(("127.0.0.1", port), timeout=EXIT_TIMEOUT) as sock:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.sendall(head[:split])
                time.sleep(DRAIN_SECONDS)
                sock.sendall(head[split:] + body)
                answer = sock.recv(4096)
            assert answer.startswith(b"HTTP/1.1 405 "), answer  # /health takes GET: the request was read whole


def test_a_whole_answer_still_running_when_the_grace_ends_is_a_503_without_a_traceback(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    with serving(tmp_path, upstream, TOOLBRIDGE_SHUTDOWN_GRACE="0.5") as (gateway, base):
        upstream.script(Turn(calls=[Call("sleep", {"seconds": 60})]), Turn(content="never"))
        body = {"model": "m", "messages": [{"role": "user", "content": "sleep"}]}
        with ThreadPoolExecutor(1) as worker:
            reply = worker.submit(httpx.post, f"{base}/v1/chat/completions", json=body, timeout=EXIT_TIMEOUT)
            deadline = time.monotonic() + EXIT_TIMEOUT
            while not upstream.chat_requests() and time.monotonic() < deadline:  # the tool is about to run
                time.sleep(0.02)
            gateway.send_signal(signal.SIGTERM)
            answer = reply.result(timeout=EXIT_TIMEOUT)
        assert gateway.wait(timeout=EXIT_TIMEOUT) == 0
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["code"] == "shutting_down"
    log = (tmp_path / "gateway.log").read_text()
    assert log.count("answer_cut_at_shutdown") == 1
    assert "Traceback" not in log and "Exception in ASGI application" not in log


def _ask(client: openai.OpenAI, stream: bool) -> Any:
    answer = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=stream)
    return list(answer) if stream else answer


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_an_answer_the_model_has_not_begun_when_the_grace_ends_is_a_json_503(
    tmp_path: Path, upstream: FakeUpstream, stream: bool
) -> None:
    """The audit's K5: the model server still computing a whole answer (or a stream's first byte) when the grace
    ends. The answer was a text/plain 500 and an error-level traceback; it is the documented 503 `shutting_down`,
    the upstream request is closed, and the log says so once, at warning."""
    arrived, release, closed = threading.Event(), threading.Event(), threading.Event()

    def held(_body: dict[str, Any]) -> Turn:
        arrived.set()
        return Turn(content="too late", hold_before_answer=release, closed=closed)

    try:
        with serving(tmp_path, upstream, TOOLBRIDGE_SHUTDOWN_GRACE="0.5", TOOLBRIDGE_LOG_FORMAT="json") as (
                gateway, base):
            upstream.script(held)
            client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0, timeout=EXIT_TIMEOUT)
            with ThreadPoolExecutor(1) as worker:
                reply = worker.submit(_ask, client, stream)
                assert arrived.wait(EXIT_TIMEOUT)
                gateway.send_signal(signal.SIGTERM)
                with pytest.raises(openai.APIStatusError) as refused:
                    reply.result(timeout=EXIT_TIMEOUT)
            gateway.wait(timeout=EXIT_TIMEOUT)
            assert closed.wait(EXIT_TIMEOUT), "the upstream request was left open"
    finally:
        release.set()
    response = refused.value.response
    assert (response.status_code, response.headers["content-type"]) == (503, "application/json")
    assert response.json()["error"]["code"] == "shutting_down"
    lines = [json.loads(line) for line in (tmp_path / "gateway.log").read_text().splitlines() if line.startswith("{")]
    assert [line["level"] for line in lines if line["event"] == "answer_cut_at_shutdown"] == ["warning"]
    assert not [line for line in lines if line["level"] in ("error", "critical")], lines
    assert "Traceback" not in (tmp_path / "gateway.log").read_text()


def test_a_client_that_leaves_while_the_model_computes_a_whole_answer_closes_the_upstream_request(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    """The audit's note under K5: a client that hung up during that wait was noticed only when the model answered,
    which may be minutes of a busy model's time later."""
    arrived, release, closed = threading.Event(), threading.Event(), threading.Event()

    def held(_body: dict[str, Any]) -> Turn:
        arrived.set()
        return Turn(content="nobody reads this", hold_before_answer=release, closed=closed)

    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    try:
        with serving(tmp_path, upstream) as (_gateway, base):
            upstream.script(held)
            port = int(base.rsplit(":", 1)[1])
            with socket.create_connection(("127.0.0.1", port), timeout=EXIT_TIMEOUT) as client:
                client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                               b"application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
                assert arrived.wait(EXIT_TIMEOUT)
            assert closed.wait(EXIT_TIMEOUT), "the upstream request outlived the client"
            assert not release.is_set()
    finally:
        release.set()


def test_a_clean_stop_exits_0(tmp_path: Path, upstream: FakeUpstream) -> None:
    """The audit's K6: uvicorn raised SIGTERM again after its clean shutdown, so every `docker stop` ended in 143
    (tini's 128 + 15) and Kubernetes marked the container `Error`."""
    with serving(tmp_path, upstream) as (gateway, _base):
        gateway.send_signal(signal.SIGTERM)
        assert gateway.wait(timeout=EXIT_TIMEOUT) == 0
    assert "Application shutdown complete" in (tmp_path / "gateway.log").read_text()


def test_a_websocket_upgrade_is_answered_as_the_http_request_it_also_is(tmp_path: Path) -> None:
    """No route takes a WebSocket, and uvicorn loads no WebSocket library (app/cli.py, ws="none", for the idle
    gateway's memory): the request is served as plain HTTP, and the log does not advise installing one."""
    upgrade = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
               "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
    with toolbridge(tmp_path, tmp_path / "none.json") as (_gateway, base):
        answer = httpx.get(f"{base}/health", headers=upgrade, timeout=EXIT_TIMEOUT)
    assert answer.status_code == 200 and "status" in answer.json()
    log = (tmp_path / "gateway.log").read_text()
    assert "Unsupported upgrade request" in log and "WebSocket library" not in log
