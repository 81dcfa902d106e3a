"""Bodies past the limit (issue 9's audit): refused by their declared size before they are read, and while a
chunked body arrives."""

from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.security.conftest import gateway_at
from tests.support.fake_upstream import FakeUpstream
from tests.support.raw_http import chat_head, send_head

ASK = [{"role": "user", "content": "hi"}]


def test_a_body_over_the_limit_is_refused_before_it_is_read(tmp_path: Path, upstream: FakeUpstream) -> None:
    upstream.script()
    with gateway_at(tmp_path, f"{upstream.url}/v1", max_body_bytes=4096) as gateway:
        status, body = send_head(gateway.thread.port, chat_head(gateway.thread.port, 100_000_000))
        assert status == 413
        assert "TOOLBRIDGE_MAX_BODY_BYTES" in body["error"]["message"]

        def chunks() -> Iterator[bytes]:  # no Content-Length: the limit holds while the body arrives
            yield b'{"model": "m", "messages": [{"role": "user", "content": "'
            yield b"x" * 8192
            yield b'"}]}'

        chunked = httpx.post(f"{gateway.url}/v1/chat/completions", content=chunks(),
                             headers={"Content-Type": "application/json"})
        assert chunked.status_code == 413
        assert chunked.json()["error"]["code"] == "request_too_large"
    assert upstream.requests == []
