"""A client that leaves takes its work with it: the upstream request closes, MCP calls are cancelled,
and no further round starts. Observed on the upstream's connection and inside the MCP server."""

import json
import socket
import threading
import time
from pathlib import Path

import httpx

from tests.conftest import Gateway
from tests.support.fake_upstream import Call, FakeUpstream, Turn

ASK = [{"role": "user", "content": "go"}]
WAIT = 15.0


def wait_for_file(path: Path) -> bool:
    deadline = time.monotonic() + WAIT
    while not path.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_leaving_mid_stream_closes_the_upstream_request(gateway: Gateway, upstream: FakeUpstream) -> None:
    hold, closed = threading.Event(), threading.Event()
    upstream.script(Turn(content="First part, then the rest.", hold_after_first_content=hold, closed=closed))
    body = {"model": "m", "messages": ASK, "stream": True}
    try:
        with httpx.stream("POST", f"{gateway.url}/v1/chat/completions", json=body, timeout=WAIT) as response:
            for line in response.iter_lines():
                if '"content":"First"' in line:
                    break
            left = time.perf_counter()
        assert closed.wait(WAIT), "the gateway kept the upstream request open after the client left"
        print(f"upstream closed {1000 * (time.perf_counter() - left):.0f} ms after the client left")
    finally:
        hold.set()
    assert httpx.get(f"{gateway.url}/health").status_code == 200


def test_leaving_mid_tool_cancels_the_call_and_starts_no_round(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    marker = tmp_path / "cancelled"
    upstream.script(Turn(calls=[Call("basic__sleep", {"seconds": 30, "marker": str(marker)})]),
                    Turn(content="never asked for"))
    body = {"model": "m", "messages": ASK, "stream": True}
    with httpx.stream("POST", f"{gateway.url}/v1/chat/completions", json=body, timeout=WAIT) as response:
        # Held in a name: an abandoned line iterator is closed at once, and that would hang up early.
        lines = response.iter_lines()
        for line in lines:
            if "Calling basic__sleep" in line:
                break
        assert wait_for_file(Path(f"{marker}.started"))
        left = time.perf_counter()
    assert wait_for_file(marker), "the MCP server never saw the call cancelled"
    print(f"MCP call cancelled {1000 * (time.perf_counter() - left):.0f} ms after the client left")
    assert len(upstream.chat_requests()) == 1


def test_a_non_streaming_client_that_leaves_stops_its_request_too(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    marker = tmp_path / "cancelled"
    upstream.script(Turn(calls=[Call("basic__sleep", {"seconds": 30, "marker": str(marker)})]),
                    Turn(content="never asked for"))
    body = json.dumps({"model": "m", "messages": ASK}).encode()
    request = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    with socket.create_connection(("127.0.0.1", gateway.thread.port), timeout=WAIT) as client:
        client.sendall(request)
        assert wait_for_file(Path(f"{marker}.started"))
    # The socket is closed, as a closed browser tab or a killed script would leave it.
    left = time.perf_counter()
    assert wait_for_file(marker), "the MCP server never saw the call cancelled"
    print(f"MCP call cancelled {1000 * (time.perf_counter() - left):.0f} ms after the client left")
    assert len(upstream.chat_requests()) == 1
