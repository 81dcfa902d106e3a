"""Issue 28: an answer's images render in a real browser, from another origin, with no key.

The answer comes from the gateway through the official openai SDK, as any client gets it; its markdown is
rendered (CommonMark, markdown-it-py) into a page served by another origin, `http://chat.example:PORT`
(Chromium resolves that name to 127.0.0.1), as a chat client's page is. The gateway has API keys: the
`<img>` sends none. Debian's Chromium through Playwright; skipped without it outside CI. Screenshots go to
test-artifacts/.
"""

import http.server
import os
import shutil
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn
from tests.support.mcp_servers.pictures import noise_png

CHROMIUM = shutil.which("chromium")
KEY = "sk-browser-key"
ARTIFACTS = Path(__file__).parent.parent / "test-artifacts"
CHAT_HOST = "chat.example"

if CHROMIUM is None and not os.environ.get("CI"):
    pytest.skip("Chromium not installed: apt-get install chromium", allow_module_level=True)


@pytest.fixture(scope="module")
def gateway(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with running_gateway(tmp_path_factory.mktemp("browser"), {"pictures": stdio_entry("pictures.py")},
                         ready=("pictures",), key=KEY, upstream_url=f"{upstream.url}/v1", api_keys=KEY) as gateway:
        yield gateway


def side(png: bytes) -> int:
    return struct.unpack(">I", png[16:20])[0]  # IHDR's width; the pictures are square


class ChatPage:
    """Another origin's page: whatever HTML it is given, at /."""

    def __init__(self) -> None:
        self.html = b""
        page = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(page.html)))
                self.end_headers()
                self.wfile.write(page.html)

            def log_message(self, *args: object) -> None:
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://{CHAT_HOST}:{self.server.server_address[1]}/"

    def __enter__(self) -> "ChatPage":
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_the_answers_markdown_images_render_in_chromium_from_another_origin(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    from playwright.sync_api import sync_playwright

    upstream.script(Turn(calls=[Call("pictures__picture", {"kilobytes": 40}), Call("pictures__for_you", {})]),
                    Turn(content="Here are **your pictures**."))
    completion = gateway.client(api_key=KEY).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "show me"}])
    answer = completion.choices[0].message.content or ""
    body = MarkdownIt("commonmark").render(answer)
    assert body.count("<img ") == 2
    with ChatPage() as chat, sync_playwright() as playwright:
        chat.html = f"<!doctype html><meta charset=utf-8><title>chat</title><body>{body}</body>".encode()
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", f"--host-resolver-rules=MAP {CHAT_HOST} 127.0.0.1"])
        try:
            tab = browser.new_page()
            requests = []
            tab.on("request", lambda request: requests.append(request))
            tab.goto(chat.url)
            tab.wait_for_function("[...document.images].every(image => image.complete)", timeout=10_000)
            sizes = tab.evaluate("[...document.images].map(image => [image.naturalWidth, image.naturalHeight])")
            ARTIFACTS.mkdir(exist_ok=True)
            tab.screenshot(path=str(ARTIFACTS / "images_in_answer.png"), full_page=True)
            assert sizes == [[side(noise_png(40))] * 2, [side(noise_png(2, seed=3))] * 2]  # both loaded, decoded
            assert tab.locator("blockquote").inner_text().startswith("💬 Saved.")
            fetched = [r for r in requests if "/images/" in r.url]
            assert len(fetched) == 2
            assert all("authorization" not in r.headers and "origin" not in r.headers for r in fetched)
            # Opened on its own, the link is the picture, not a page of the gateway's origin.
            response = tab.goto(fetched[0].url)
            assert response is not None and response.headers["content-type"] == "image/png"
            assert tab.evaluate("document.images.length") == 1 and tab.evaluate("document.scripts.length") == 0
        finally:
            browser.close()
