"""DNS rebinding and foreign pages (issue 9's audit): a Host the gateway was not given is refused on every route,
so a page that rebinds a name to 127.0.0.1 reaches nothing; origins of other web pages are refused, desktop apps and
loopback pages served, listed origins get CORS."""

import json
from pathlib import Path

import pytest

from tests.conftest import Gateway
from tests.security.conftest import gateway_at
from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.support.raw_http import envelope, raw
from tests.support.servers import free_port

ASK = [{"role": "user", "content": "hi"}]




@pytest.mark.parametrize("path", ["/health", "/tools", "/prompts", "/resources", "/v1/models"])
def test_a_foreign_host_name_is_refused(relay: Gateway, upstream: FakeUpstream, path: str) -> None:
    status, _, body = raw(relay, "GET", path, {"Host": "evil.example", "Origin": "http://evil.example"})
    assert status == 403
    assert envelope(status, body)["code"] == "host_not_allowed"
    assert upstream.paths == []


def test_a_rebinding_page_cannot_run_tools_through_chat(relay: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(calls=[Call("basic__echo", {"text": "x"})]), Turn(content="done"))
    chat = json.dumps({"model": "m", "messages": ASK}).encode()
    for host in ("evil.example", "evil.example:8000", "127.0.0.1.evil.example"):
        status, _, _ = raw(relay, "POST", "/v1/chat/completions",
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
def test_web_pages_from_other_origins_are_refused(relay: Gateway, upstream: FakeUpstream, origin: str) -> None:
    status, headers, body = raw(relay, "GET", "/v1/models", {"Origin": origin})
    assert status == 403
    assert envelope(status, body)["code"] == "origin_not_allowed"
    assert "access-control-allow-origin" not in headers
    assert upstream.paths == []


@pytest.mark.parametrize("origin", ["null", "app://-", "file://", "tauri://localhost", "chrome-extension://abc",
                                    "http://localhost:3000", "http://127.0.0.1:8080", "http://[::1]:5173"])
def test_desktop_apps_and_loopback_pages_keep_working(relay: Gateway, origin: str) -> None:
    status, _, body = raw(relay, "GET", "/v1/models", {"Origin": origin})
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


def test_nothing_listens_for_a_refused_host_header_either(tmp_path: Path, upstream: FakeUpstream) -> None:
    """A gateway bound to every interface still refuses names it was not given."""
    with gateway_at(tmp_path, f"{upstream.url}/v1", host="0.0.0.0") as gateway:
        assert raw(gateway, "GET", "/health", {"Host": f"127.0.0.1:{free_port()}"})[0] == 200
        assert raw(gateway, "GET", "/health", {"Host": "192.168.1.20:8000"})[0] == 403
