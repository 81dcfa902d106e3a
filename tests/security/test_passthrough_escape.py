"""The pass-through as a way elsewhere (issue 9's audit, turn 2): a path that names another host (SSRF with the
upstream key), dot segments in any encoding, control characters, a client's keys carried along, a GET's stray body
read as the next request. The upstream key goes to the base URL and nowhere else."""

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from tests.conftest import Gateway
from tests.security.conftest import UPSTREAM_KEY, gateway_at
from tests.support.fake_upstream import FakeUpstream
from tests.support.raw_http import Recorder, envelope, raw

ASK = [{"role": "user", "content": "hi"}]




@pytest.mark.parametrize(
    "path",
    ["/v1/http://127.0.0.1:{port}/steal", "/v1/http:%2F%2F127.0.0.1:{port}/steal",
     "/v1/http:/%2F127.0.0.1:{port}/steal", "/v1//127.0.0.1:{port}/steal"],
)
def test_the_passthrough_never_fetches_another_url(
    relay: Gateway, upstream: FakeUpstream, recorder: tuple[Recorder, int], path: str
) -> None:
    target, port = recorder
    status, _, body = raw(relay, "GET", path.format(port=port))
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
def test_dot_segments_in_any_encoding_are_refused(relay: Gateway, upstream: FakeUpstream, path: str) -> None:
    status, _, body = raw(relay, "GET", path)
    assert status == 400
    assert envelope(status, body)["code"] == "invalid_path"
    assert upstream.paths == []


def test_a_control_character_in_the_path_is_a_400(relay: Gateway, upstream: FakeUpstream) -> None:
    status, _, body = raw(relay, "GET", "/v1/%00")
    assert status == 400
    assert envelope(status, body)["code"] == "invalid_path"
    assert upstream.paths == []


def test_the_upstream_key_goes_only_to_the_base_url(relay: Gateway, upstream: FakeUpstream) -> None:
    status, _, _ = raw(relay, "GET", "/v1/models")
    assert status == 200
    assert upstream.paths == ["/v1/models"]
    assert upstream.headers[0]["authorization"] == f"Bearer {UPSTREAM_KEY}"


def test_client_keys_in_headers_or_query_never_reach_the_upstream(relay: Gateway, upstream: FakeUpstream) -> None:
    response = httpx.post(
        f"{relay.url}/v1/embeddings?api_key=CLIENT-QUERY-KEY&dimensions=3",
        json={"model": "embed", "input": "x"},
        headers={"X-Api-Key": "CLIENT-HEADER-KEY", "Api-Key": "CLIENT-AZURE-KEY"},
    )
    assert response.status_code == 200
    sent = json.dumps(upstream.headers) + " ".join(upstream.queries)
    assert "CLIENT-" not in sent
    assert upstream.queries == ["dimensions=3"]




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
