"""The HTTP server `toolbridge` runs (app/serving.py), as a process: request heads split across TCP segments."""

import socket
import time
from pathlib import Path

from tests.test_cli import EXIT_TIMEOUT, toolbridge

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
