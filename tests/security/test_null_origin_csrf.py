"""Issue 27, N5: a web page elsewhere cannot change anything through the gateway, even one without keys.

A browser sends a POST to another origin without asking first (no CORS preflight) only when it is a
"simple" request: a `text/plain`, form or typeless body, no custom header. A sandboxed frame or a local file
sends it with `Origin: null`. Such requests are sent here with exactly those headers, over real HTTP; the
same attack from a real page in Chromium is in test_a_page_on_another_port_cannot_run_tools_in_chromium.
"""

import http.server
import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import Gateway, running_gateway, stdio_entry, wait_for_health
from tests.support.fake_upstream import FakeUpstream, Turn
from tests.support.raw_http import Recorder, envelope, raw
from tests.support.servers import ServerThread

CHROMIUM = shutil.which("chromium")
PLAYGROUND = json.dumps({"tool": "basic__echo", "arguments": {"text": "from a foreign page"}}).encode()
CHAT = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
# What Chromium sends for `fetch(url, {method: "POST", mode: "no-cors", body: "..."})` or a text/plain form.
SIMPLE = {"Content-Type": "text/plain;charset=UTF-8", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Site": "cross-site"}
ATTACKS = [
    ("/ui/playground", PLAYGROUND),
    ("/ui/servers/basic/restart", b""),
    ("/ui/waiting/any", json.dumps({"verdict": "approve"}).encode()),  # a waiting call's approval
    ("/v1/chat/completions", CHAT),
    ("/v1/models/unload", json.dumps({"model": "m"}).encode()),  # the pass-through, with the upstream key
]


@pytest.fixture(scope="module")
def recorded() -> Iterator[tuple[Recorder, str]]:
    """An upstream that records every request that reaches it, any path. Shared by the module's tests, as is
    `no_keys`: every test that uses them asserts that nothing reached the upstream, ran or restarted (the state
    they share), so an attack let through fails its own test and every later one."""
    target = Recorder()
    with ServerThread(target.app) as thread:
        yield target, f"{thread.url}/v1"


@pytest.fixture(scope="module")
def no_keys(tmp_path_factory: pytest.TempPathFactory, recorded: tuple[Recorder, str]) -> Iterator[Gateway]:
    """The default gateway: no keys, the basic MCP server, the upstream key set."""
    with running_gateway(tmp_path_factory.mktemp("no_keys"), {"basic": stdio_entry("basic.py")}, ready=("basic",),
                         upstream_url=recorded[1], upstream_api_key="sk-upstream-CANARY") as gateway:
        yield gateway


def nothing_happened(gateway: Gateway, recorder: Recorder) -> None:
    # Nothing reached the upstream, with its key or without (the gateway's own probes of it aside).
    assert [path for path, _ in recorder.seen if path in ("/v1/chat/completions", "/v1/models/unload")] == []
    assert httpx.get(f"{gateway.url}/ui/calls").json()["data"] == []  # no tool ran
    assert httpx.get(f"{gateway.url}/health").json()["servers"]["basic"].get("restarts", 0) == 0


@pytest.mark.parametrize(("path", "body"), ATTACKS, ids=[path for path, _ in ATTACKS])
@pytest.mark.parametrize("origin", ["null", "http://127.0.0.1:9", None], ids=["null", "loopback-page", "no-origin"])
def test_a_simple_post_from_any_page_is_refused(
    no_keys: Gateway, recorded: tuple[Recorder, str], path: str, body: bytes, origin: str | None
) -> None:
    """A sandboxed frame (null), a page on another loopback port (allowed to read), or a form posted from a
    local file: each a `text/plain` body no browser asked permission for."""
    headers = SIMPLE | ({"Origin": origin} if origin else {})
    status, cors, answer = raw(no_keys, "POST", path, headers, body)
    assert status in (400, 403), answer
    assert envelope(status, answer)["code"] in ("origin_not_allowed", "invalid_content_type")
    assert "access-control-allow-origin" not in cors
    # The same, with no type at all (a Blob body) or a form's type.
    for content_type in ("application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None):
        sent = {k: v for k, v in headers.items() if k != "Content-Type"}
        status, _, answer = raw(no_keys, "POST", path, sent | ({"Content-Type": content_type} if content_type else {}),
                                body)
        assert status in (400, 403), answer
    nothing_happened(no_keys, recorded[0])


@pytest.mark.parametrize(("path", "body"), ATTACKS, ids=[path for path, _ in ATTACKS])
def test_an_unknown_or_opaque_origin_may_not_change_anything_even_declared_json(
    no_keys: Gateway, recorded: tuple[Recorder, str], path: str, body: bytes
) -> None:
    """JSON makes a browser ask first, which no origin here passes; refused anyway, in case a browser or a
    proxy gets that wrong. `null` on the API is what some desktop apps send (below); never on the page."""
    origins = ["data:", "javascript:", "about:blank", "evil"] + (["null"] if path.startswith("/ui/") else [])
    for origin in origins:
        status, _, answer = raw(no_keys, "POST", path, {"Origin": origin, "Content-Type": "application/json"}, body)
        assert status == 403, answer
        assert envelope(status, answer)["code"] == "origin_not_allowed"
    nothing_happened(no_keys, recorded[0])


def test_reading_stays_open_to_desktop_apps_and_sandboxed_frames(no_keys: Gateway) -> None:
    for origin in ("null", "app://-", "file://", "tauri://localhost"):
        assert raw(no_keys, "GET", "/ui/calls", {"Origin": origin})[0] == 200


def test_a_desktop_app_that_sends_null_keeps_chatting(tmp_path: Path, upstream: FakeUpstream) -> None:
    """An Electron app without web security sends `Origin: null` with JSON and no preflight: served, as a
    browser page cannot send this without a preflight no origin here passes."""
    upstream.script(Turn(content="served"))
    with running_gateway(tmp_path, upstream_url=f"{upstream.url}/v1") as gateway:
        status, _, answer = raw(gateway, "POST", "/v1/chat/completions",
                                {"Origin": "null", "Content-Type": "application/json"}, CHAT)
        assert status == 200, answer
        status, headers, _ = raw(gateway, "OPTIONS", "/v1/chat/completions", {
            "Origin": "null", "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type"})
        assert "access-control-allow-origin" not in headers  # a sandboxed frame's preflight is not answered


def test_desktop_apps_sdks_and_the_status_page_still_post(tmp_path: Path, upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="a"), Turn(content="b"), Turn(content="c"))
    with running_gateway(tmp_path, {"basic": stdio_entry("basic.py")}, ready=("basic",),
                         upstream_url=f"{upstream.url}/v1") as gateway:
        # The openai SDK (no Origin), a desktop app's page (Electron, Tauri): JSON chats.
        assert gateway.client().chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}]) \
            .choices[0].message.content == "a"
        for origin in ("app://-", "tauri://localhost"):
            status, _, answer = raw(gateway, "POST", "/v1/chat/completions",
                                    {"Origin": origin, "Content-Type": "application/json"}, CHAT)
            assert status == 200, answer
        # An SDK uploading a file sends multipart with its key (a bearer header needs a preflight in a browser).
        status, _, _ = raw(gateway, "POST", "/v1/files",
                           {"Content-Type": "multipart/form-data; boundary=x", "Authorization": "Bearer any"}, b"--x--")
        assert status != 400
        # The status page's own requests: same origin, JSON, the restart declared JSON without a body.
        page = {"Origin": gateway.url, "Content-Type": "application/json"}
        status, _, answer = raw(gateway, "POST", "/ui/playground", page, PLAYGROUND)
        assert status == 200 and json.loads(answer)["content"], answer
        assert raw(gateway, "POST", "/ui/servers/basic/restart", page)[0] == 202
        wait_for_health(gateway.url, lambda body: body["servers"]["basic"].get("restarts") == 1)


# The same attack from a real page in Chromium (the audit's ui_browser.py, cut down)


def attacker_page(gateway: str) -> str:
    """A page whose sandboxed frame (Origin: null) posts a text/plain form and no-cors fetches to the gateway;
    its own fetch comes from its http origin. Each reports to `window.top` when its request was sent."""
    fetch = json.dumps(PLAYGROUND.decode())
    form_name = PLAYGROUND.decode()[:-1] + ',"x":"'
    inner = f"""<form id=f method=POST action="{gateway}/ui/playground" enctype="text/plain" target=sink>
<input name='{form_name}' value='"}}'></form><iframe name=sink></iframe>
<script>
Promise.allSettled([
  fetch("{gateway}/ui/playground", {{method: "POST", mode: "no-cors", body: {fetch}}}),
  fetch("{gateway}/ui/servers/basic/restart", {{method: "POST", mode: "no-cors"}}),
  fetch("{gateway}/ui/playground", {{method: "POST", mode: "no-cors", body: new Blob([{fetch}])}}),
]).then(() => {{ document.getElementById("f").submit(); parent.postMessage("sent", "*"); }});
</script>"""
    srcdoc = inner.replace("&", "&amp;").replace('"', "&quot;")
    return f"""<!doctype html><body><script>
window.sent = 0;
addEventListener("message", () => window.sent++);
fetch("{gateway}/ui/playground", {{method: "POST", mode: "no-cors", body: {fetch}}}).then(() => window.sent++);
</script><iframe sandbox="allow-scripts allow-forms" srcdoc="{srcdoc}"></iframe></body>"""

@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"), reason="Chromium not installed")
def test_a_page_on_another_port_cannot_run_tools_in_chromium(
    no_keys: Gateway, recorded: tuple[Recorder, str]
) -> None:
    from playwright.sync_api import sync_playwright

    page_html = attacker_page(no_keys.url).encode()

    class Attacker(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page_html)))
            self.end_headers()
            self.wfile.write(page_html)

        def log_message(self, *args: object) -> None:
            return

    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Attacker)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                tab = browser.new_page()
                tab.goto(f"http://127.0.0.1:{site.server_address[1]}/")
                tab.wait_for_function("window.sent >= 2", timeout=20_000)  # the page's fetch and the frame's
                tab.wait_for_load_state("networkidle")
            finally:
                browser.close()
    finally:
        site.shutdown()
        site.server_close()
    nothing_happened(no_keys, recorded[0])
