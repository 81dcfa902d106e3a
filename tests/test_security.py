"""The audit of issue 9, replayed: every attack it found, sent over real HTTP to a running gateway.

Raw requests go through `http.client` or a socket, because httpx and the SDK would clean the very
paths and headers an attacker sends as they are.
"""

import contextlib
import http.client
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import openai
import psutil
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from tests.conftest import Gateway, running_gateway, stdio_entry, wait_for_health
from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.support.servers import ServerThread, free_port, raw_upstream

ASK = [{"role": "user", "content": "hi"}]
UPSTREAM_KEY = "sk-upstream-CANARY"
RAW_TIMEOUT = 10


def gateway_at(
    tmp_path: Path, upstream_url: str, servers: dict | None = None, **overrides: Any
) -> AbstractContextManager[Gateway]:
    return running_gateway(tmp_path, servers, upstream_url=upstream_url, **overrides)


@pytest.fixture
def gateway(tmp_path: Path, upstream: FakeUpstream) -> Iterator[Gateway]:
    upstream.script()
    with gateway_at(tmp_path, f"{upstream.url}/v1", upstream_api_key=UPSTREAM_KEY) as gateway:
        yield gateway


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


class Recorder:
    """Any path, any method: records what reached it. Standing in for a host the attacker wants reached."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, str]]] = []

        async def record(request: Request) -> Response:
            self.seen.append((request.url.path, dict(request.headers)))
            return PlainTextResponse("stolen")

        self.app = Starlette(routes=[Route("/{path:path}", record, methods=["GET", "POST"])])


@pytest.fixture
def recorder() -> Iterator[tuple[Recorder, int]]:
    target = Recorder()
    with ServerThread(target.app) as thread:
        yield target, thread.port


# 1. SSRF through the pass-through


@pytest.mark.parametrize(
    "path",
    ["/v1/http://127.0.0.1:{port}/steal", "/v1/http:%2F%2F127.0.0.1:{port}/steal",
     "/v1/http:/%2F127.0.0.1:{port}/steal", "/v1//127.0.0.1:{port}/steal"],
)
def test_the_passthrough_never_fetches_another_url(
    gateway: Gateway, upstream: FakeUpstream, recorder: tuple[Recorder, int], path: str
) -> None:
    target, port = recorder
    status, _, body = raw(gateway, "GET", path.format(port=port))
    assert target.seen == []
    assert b"stolen" not in body
    assert status in (400, 404)
    assert all(p.startswith("/v1/") for p in upstream.paths)


@pytest.mark.parametrize(
    "path",
    ["/v1/../../etc/passwd", "/v1/%2e%2e/api/v1/models", "/v1/%2E%2E/%2E%2E/etc/passwd", "/v1/models/..%2F..%2Fapi",
     "/v1/models%2f..%2f..%2fapi/v1/models", "/v1/./models", "/v1/models/..%5c..%5capi", "/v1/.%2e/api/v1/models",
     "/v1/%252e%252e/api/v1/models", "/v1/..;/api/v1/models", "/v1/models/..;x=1/..;/api",
     "/v1/%EF%BC%8E%EF%BC%8E/api/v1/models"],
)
def test_dot_segments_in_any_encoding_are_refused(gateway: Gateway, upstream: FakeUpstream, path: str) -> None:
    status, _, body = raw(gateway, "GET", path)
    assert status == 400
    assert envelope(status, body)["code"] == "invalid_path"
    assert upstream.paths == []


def test_a_control_character_in_the_path_is_a_400(gateway: Gateway, upstream: FakeUpstream) -> None:
    status, _, body = raw(gateway, "GET", "/v1/%00")
    assert status == 400
    assert envelope(status, body)["code"] == "invalid_path"
    assert upstream.paths == []


def test_the_upstream_key_goes_only_to_the_base_url(gateway: Gateway, upstream: FakeUpstream) -> None:
    status, _, _ = raw(gateway, "GET", "/v1/models")
    assert status == 200
    assert upstream.paths == ["/v1/models"]
    assert upstream.headers[0]["authorization"] == f"Bearer {UPSTREAM_KEY}"


def test_client_keys_in_headers_or_query_never_reach_the_upstream(gateway: Gateway, upstream: FakeUpstream) -> None:
    response = httpx.post(
        f"{gateway.url}/v1/embeddings?api_key=CLIENT-QUERY-KEY&dimensions=3",
        json={"model": "embed", "input": "x"},
        headers={"X-Api-Key": "CLIENT-HEADER-KEY", "Api-Key": "CLIENT-AZURE-KEY"},
    )
    assert response.status_code == 200
    sent = json.dumps(upstream.headers) + " ".join(upstream.queries)
    assert "CLIENT-" not in sent
    assert upstream.queries == ["dimensions=3"]


PROTECTED = [("GET", "/tools"), ("GET", "/prompts"), ("GET", "/resources"), ("GET", "/v1/models"),
             ("POST", "/v1/chat/completions"), ("GET", "/v1/models/x"),
             ("POST", "/v1/embeddings"), ("GET", "/metrics"), ("GET", "/openapi.json"), ("DELETE", "/v1/files/f"),
             ("GET", "/ui/calls"), ("GET", "/ui/events"), ("POST", "/ui/playground"), ("POST", "/ui/servers/x/restart"),
             ("GET", "/ui/waiting"), ("POST", "/ui/waiting/x"),
             ("POST", "/v1/responses"), ("POST", "/v1/messages"), ("POST", "/api/chat"), ("GET", "/api/tags")]
PATH_FORMS = ["{path}", "{path}/", "/{path}", "{upper}", "{path}?api_key=k1"]
WRONG_CREDENTIALS = [{}, {"Authorization": "Bearer"}, {"Authorization": "Bearer wrong"},
                     {"Authorization": "Bearer K1"}, {"Authorization": "Bearer k1x"}, {"Authorization": "Basic azE="},
                     {"Authorization": "Token k1"}, {"Authorization": "k1"}, {"X-Api-Key": "k1x"},
                     {"Cookie": "api_key=k1"}]


def test_no_protected_route_is_reached_without_the_key(tmp_path: Path, upstream: FakeUpstream) -> None:
    """1,000 requests: every protected route (each door's too), in several spellings, with every wrong way to send
    a key (x-api-key is a right one: Anthropic's clients send it)."""
    upstream.script()
    body = json.dumps({"model": "m", "messages": ASK}).encode()
    with gateway_at(tmp_path, f"{upstream.url}/v1", api_keys="k1") as gateway:
        cases = [(method, form.format(path=path, upper=path.upper()), credentials)
                 for method, path in PROTECTED for form in PATH_FORMS for credentials in WRONG_CREDENTIALS]
        answered = {
            (method, path, json.dumps(credentials)): raw(
                gateway, method, path, {"Content-Type": "application/json", **credentials},
                body if method == "POST" else b"",
            )[0]
            for method, path, credentials in cases
        }
        assert raw(gateway, "GET", "/v1/models", {"Authorization": "Bearer k1"})[0] == 200
    assert len(answered) == len(PROTECTED) * len(PATH_FORMS) * len(WRONG_CREDENTIALS) == 1000
    assert {case: status for case, status in answered.items() if status != 401} == {}
    assert upstream.paths == ["/v1/models"]


# 2. DNS rebinding


@pytest.mark.parametrize("path", ["/health", "/tools", "/prompts", "/resources", "/v1/models"])
def test_a_foreign_host_name_is_refused(gateway: Gateway, upstream: FakeUpstream, path: str) -> None:
    status, _, body = raw(gateway, "GET", path, {"Host": "evil.example", "Origin": "http://evil.example"})
    assert status == 403
    assert envelope(status, body)["code"] == "host_not_allowed"
    assert upstream.paths == []


def test_a_rebinding_page_cannot_run_tools_through_chat(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(calls=[Call("basic__echo", {"text": "x"})]), Turn(content="done"))
    chat = json.dumps({"model": "m", "messages": ASK}).encode()
    for host in ("evil.example", "evil.example:8000", "127.0.0.1.evil.example"):
        status, _, _ = raw(gateway, "POST", "/v1/chat/completions",
                           {"Host": host, "Origin": f"http://{host}", "Content-Type": "application/json"}, chat)
        assert status == 403
    assert upstream.requests == []


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST", "[::1]:{port}",
                                  "app.localhost", "toolbridge:8000", "Toolbridge"])
def test_loopback_names_and_listed_hosts_are_served(tmp_path: Path, upstream: FakeUpstream, host: str) -> None:
    with gateway_at(tmp_path, f"{upstream.url}/v1", allowed_hosts="toolbridge") as gateway:
        status, _, _ = raw(gateway, "GET", "/health", {"Host": host.format(port=gateway.thread.port)})
    assert status == 200


def test_the_unspecified_address_is_no_host_name(tmp_path: Path, upstream: FakeUpstream) -> None:
    """Browsers let pages send to 0.0.0.0 ("0.0.0.0 day"); bound to it or not, it is not a name served."""
    with gateway_at(tmp_path, f"{upstream.url}/v1", host="0.0.0.0") as gateway:
        assert raw(gateway, "GET", "/health", {"Host": "0.0.0.0:8000"})[0] == 403
        assert raw(gateway, "GET", "/health", {"Host": "localhost.:8000"})[0] == 200


def test_the_bind_address_is_served(tmp_path: Path, upstream: FakeUpstream) -> None:
    with gateway_at(tmp_path, f"{upstream.url}/v1", host="192.0.2.10") as gateway:
        assert raw(gateway, "GET", "/health", {"Host": "192.0.2.10:8000"})[0] == 200
        assert raw(gateway, "GET", "/health", {"Host": "192.0.2.11:8000"})[0] == 403


@pytest.mark.parametrize("origin", ["http://evil.example", "https://evil.example:8443", "http://127.0.0.1.nip.io",
                                    "https://web.chatboxai.app"])
def test_web_pages_from_other_origins_are_refused(gateway: Gateway, upstream: FakeUpstream, origin: str) -> None:
    status, headers, body = raw(gateway, "GET", "/v1/models", {"Origin": origin})
    assert status == 403
    assert envelope(status, body)["code"] == "origin_not_allowed"
    assert "access-control-allow-origin" not in headers
    assert upstream.paths == []


@pytest.mark.parametrize("origin", ["null", "app://-", "file://", "tauri://localhost", "chrome-extension://abc",
                                    "http://localhost:3000", "http://127.0.0.1:8080", "http://[::1]:5173"])
def test_desktop_apps_and_loopback_pages_keep_working(gateway: Gateway, origin: str) -> None:
    status, _, body = raw(gateway, "GET", "/v1/models", {"Origin": origin})
    assert status == 200
    assert json.loads(body)["data"]


def test_listed_origins_get_cors_headers_and_preflights(tmp_path: Path, upstream: FakeUpstream) -> None:
    origin = "https://web.chatboxai.app"
    with gateway_at(tmp_path, f"{upstream.url}/v1", cors_origins=f"{origin}/", api_keys="k1") as gateway:
        status, headers, _ = raw(gateway, "OPTIONS", "/v1/chat/completions", {
            "Origin": origin, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type"})
        assert status == 200  # a preflight carries no key; the browser sends it with the real request
        assert headers["access-control-allow-origin"] == origin
        assert "authorization" in headers["access-control-allow-headers"].lower()
        status, headers, _ = raw(gateway, "GET", "/v1/models", {"Origin": origin, "Authorization": "Bearer k1"})
        assert status == 200
        assert headers["access-control-allow-origin"] == origin
        status, headers, _ = raw(gateway, "GET", "/v1/models", {"Origin": origin})
        assert status == 401
        assert headers["access-control-allow-origin"] == origin  # so the web app can read why


# 3. A server's stderr stays with the operator


def test_a_servers_stderr_never_reaches_another_users_chat(tmp_path: Path, upstream: FakeUpstream) -> None:
    servers = {"leaky": stdio_entry("leaky.py", str(tmp_path / "down"))}
    with gateway_at(tmp_path, f"{upstream.url}/v1", servers, api_keys="key-a,key-b") as gateway:
        wait_for_health(gateway.url, lambda b: b["servers"]["leaky"]["state"] == "ready", key="key-a")
        upstream.script(Turn(calls=[Call("leaky__note", {"text": "USER-A-PRIVATE"})]), Turn(content="saved"))
        user_a = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="key-a", max_retries=0)
        user_a.chat.completions.create(model="m", messages=ASK)
        wait_for_health(gateway.url, lambda b: b["servers"]["leaky"]["state"] == "failed", key="key-a")

        upstream.script(Turn(calls=[Call("leaky__ping", {})]), Turn(content="it is down"))
        user_b = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="key-b", max_retries=0)
        shown = "".join(
            (chunk.choices[0].delta.content or "") + str(getattr(chunk.choices[0].delta, "reasoning_content", ""))
            for chunk in user_b.chat.completions.create(model="m", messages=ASK, stream=True) if chunk.choices
        )
        tool_message = json.dumps(upstream.chat_requests()[1]["messages"][-1])
        assert "server_unavailable" in tool_message
        for secret in ("USER-A-PRIVATE", "OPERATOR-SECRET", "stderr"):
            assert secret not in tool_message
            assert secret not in shown

        anonymous = httpx.get(f"{gateway.url}/health")
        assert anonymous.json() == {"status": "degraded"}
        operator = httpx.get(f"{gateway.url}/health", headers={"Authorization": "Bearer key-a"}).json()
        assert "OPERATOR-SECRET-CANARY" in json.dumps(operator["servers"]["leaky"])


# 4. Malformed requests are 400s that lose nothing


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": NaN}', None),
        (b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "top_p": Infinity}', None),
        (b'{"model": "m", "messages": [{"role": "user", "content": "\\ud800"}]}', None),
        (b'{"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}',
         "messages.0.content"),
        (b'{"model": "m", "messages": [{"role": "user", "content": [5]}]}', "messages.0.content"),
        (b'{"model": "m", "messages": [{"role": "user", "content": 5}]}', "messages.0.content"),
        (b'{"model": "m", "messages": [{"role": 5, "content": "hi"}]}', "messages.0.role"),
        (b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", '
         b'"function": "x"}]}', "tools.0.function"),
        (b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}',
         "tools.0"),
        (b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": ["x"]}', "tools.0"),
        (b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": "yes"}', "stream"),
        (b'{"model": 5, "messages": [{"role": "user", "content": "hi"}]}', "model"),
        (b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "x": ' + b"[" * 5000 + b"]" * 5000 + b"}",
         None),
    ],
)
def test_malformed_chat_requests_are_400s(gateway: Gateway, upstream: FakeUpstream, body: bytes, param: str) -> None:
    status, _, answer = raw(gateway, "POST", "/v1/chat/completions", {"Content-Type": "application/json"}, body)
    assert status == 400, answer
    error = envelope(status, answer)
    assert error["type"] == "invalid_request_error"
    assert error["code"] != "internal_error"
    assert error["param"] == param
    assert upstream.requests == []


def test_other_methods_on_chat_completions_are_a_405_envelope(gateway: Gateway, upstream: FakeUpstream) -> None:
    for method in ("GET", "PUT", "DELETE"):
        status, headers, body = raw(gateway, method, "/v1/chat/completions")
        assert status == 405
        assert headers["allow"] == "POST"
        assert envelope(status, body)["code"] == "method_not_allowed"
    assert upstream.paths == []


# 6. Bodies: the key first, then a bounded size and time


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


def test_without_a_key_no_body_is_read_or_validated(tmp_path: Path, upstream: FakeUpstream) -> None:
    upstream.script()
    with gateway_at(tmp_path, f"{upstream.url}/v1", api_keys="k1") as gateway:
        status, body = send_head(gateway.thread.port, chat_head(gateway.thread.port, 40_000_000))
        assert (status, body["error"]["code"]) == (401, "invalid_api_key")
        invalid = httpx.post(f"{gateway.url}/v1/chat/completions", content=b"{not json",
                             headers={"Content-Type": "application/json"})
        assert invalid.status_code == 401
        assert "JSON" not in invalid.json()["error"]["message"]
    assert upstream.requests == []


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
        stream = client.chat.completions.create(model="m", messages=ASK, stream=True)
        first = next(iter(stream))  # the first request is in flight, held by the upstream
        assert first.choices[0].delta.role == "assistant"
        refused = httpx.post(f"{gateway.url}/v1/chat/completions", json={"model": "m", "messages": ASK})
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
                              json={"model": "m", "messages": ASK, "stream": True}) as response:
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


# 7. The pass-through sends no body on GET; a broken upstream is a 502


class _StrictUpstream(BaseHTTPRequestHandler):
    """The standard library's HTTP/1.1 server, keeping connections alive: it reads a body only when one is
    declared, so stray chunked bytes would be read as the next request."""

    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[dict[str, str]]] = []

    def do_GET(self) -> None:
        self.seen.append(dict(self.headers))
        payload = json.dumps({"object": "list", "data": [{"id": "strict-model", "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def strict_upstream() -> Iterator[str]:
    _StrictUpstream.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StrictUpstream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_gets_are_passed_on_without_a_body(tmp_path: Path, strict_upstream: str, transport: str) -> None:
    with gateway_at(tmp_path, strict_upstream, upstream_transport=transport) as gateway:
        for _ in range(3):
            response = httpx.get(f"{gateway.url}/v1/models/strict-model")
            assert response.status_code == 200
            assert httpx.get(f"{gateway.url}/v1/models").json()["data"][0]["id"] == "strict-model"
        # A GET that declares a body it sends: the upstream still gets none, and the answer does not wait.
        status, _, body = raw(gateway, "GET", "/v1/models", body=b"hello")
        assert (status, json.loads(body)["data"][0]["id"]) == (200, "strict-model")
    assert all("transfer-encoding" not in {k.lower() for k in h} for h in _StrictUpstream.seen)
    assert all(h.get("Content-Length", "0") == "0" for h in _StrictUpstream.seen)


@pytest.fixture
def garbage_upstream() -> Iterator[str]:
    """Answers every request with bytes that are not HTTP."""

    def answer(connection: socket.socket) -> None:
        connection.settimeout(1)
        with contextlib.suppress(OSError):
            connection.recv(65536)
            connection.sendall(b"NOT HTTP AT ALL\r\n\r\n")

    with raw_upstream(answer) as url:
        yield url


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_an_upstream_that_answers_garbage_is_a_502(tmp_path: Path, garbage_upstream: str, transport: str) -> None:
    with gateway_at(tmp_path, garbage_upstream, upstream_transport=transport) as gateway:
        for response in (
            httpx.get(f"{gateway.url}/v1/models"),
            httpx.get(f"{gateway.url}/v1/models/x"),
            httpx.post(f"{gateway.url}/v1/chat/completions", json={"model": "m", "messages": ASK}),
        ):
            assert response.status_code == 502, response.text
            assert response.json()["error"]["type"] == "upstream_error"


# 8. A cut-off stream is said to be cut off


def cut_off() -> Turn:
    piece = {"id": "x", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "Hal"}}]}
    return Turn(raw=[piece, piece], done=False)


def test_a_stream_the_upstream_cuts_off_ends_in_an_error_event(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(cut_off())
    stream = gateway.client().chat.completions.create(model="m", messages=ASK, stream=True)
    seen: list[str] = []
    with pytest.raises(openai.APIError, match="broke off"):
        for chunk in stream:
            assert chunk.choices[0].finish_reason is None
            seen.append(chunk.choices[0].delta.content or "")
    assert "".join(seen) == "HalHal"


def test_a_whole_answer_the_upstream_cuts_off_is_a_502(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(cut_off())
    response = httpx.post(f"{gateway.url}/v1/chat/completions", json={"model": "m", "messages": ASK})
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_cut_off"


# Low: upstream errors keep their Retry-After and lose their markup


def test_an_upstream_429_keeps_its_retry_after(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(status=429, error="slow down", headers={"Retry-After": "7"}))
    with pytest.raises(openai.RateLimitError) as caught:
        gateway.client().chat.completions.create(model="m", messages=ASK)
    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.body["message"] == "slow down"


def test_an_upstream_html_error_page_becomes_its_words(gateway: Gateway, upstream: FakeUpstream) -> None:
    page = ("<html><head><title>502 Bad Gateway</title><style>body{}</style></head>"
            "<body><h1>Bad Gateway</h1><pre>/srv/app/secret/path.py</pre></body></html>")
    upstream.script(Turn(status=502, raw_body=page))
    response = httpx.post(f"{gateway.url}/v1/chat/completions", json={"model": "m", "messages": ASK})
    assert response.status_code == 502
    assert response.json()["error"]["message"] == "Upstream error: 502 Bad Gateway"


def test_nothing_listens_for_a_refused_host_header_either(tmp_path: Path, upstream: FakeUpstream) -> None:
    """A gateway bound to every interface still refuses names it was not given."""
    with gateway_at(tmp_path, f"{upstream.url}/v1", host="0.0.0.0") as gateway:
        assert raw(gateway, "GET", "/health", {"Host": f"127.0.0.1:{free_port()}"})[0] == 200
        assert raw(gateway, "GET", "/health", {"Host": "192.168.1.20:8000"})[0] == 403
