"""The HTTP server `toolbridge` runs (app/serving.py), as a process: request heads split across TCP segments,
and answers still running when the shutdown grace runs out (streams: tests/test_cli.py)."""

import signal
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

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
        assert gateway.wait(timeout=EXIT_TIMEOUT) in (0, -signal.SIGTERM)
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["code"] == "shutting_down"
    log = (tmp_path / "gateway.log").read_text()
    assert log.count("answer_cut_at_shutdown") == 1
    assert "Traceback" not in log and "Exception in ASGI application" not in log
