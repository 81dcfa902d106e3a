"""Issue 28, in Open WebUI itself (opt-in, see tests/support/open_webui.py): a tool's images and user-only
text show in its chat page.

Open WebUI -> the gateway (keys set, details trace) -> a scripted upstream that calls the pictures server's
tools, then answers. Debian's Chromium opens the chat page, sends a message and waits for the images, then
thanks it and checks what the model was sent; in the details trace and the default one. Screenshots:
test-artifacts/open_webui_images_{details,reasoning}.png.
"""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.openai.schemas import content_text
from tests.conftest import Gateway, stdio_entry
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn
from tests.support.open_webui import chat_page, keyed_gateway, running_open_webui, send, skip_without_open_webui

KEY = "sk-owui-key"
skip_without_open_webui()


class NotLmStudio(FakeUpstream):
    """An upstream that does not say its context: Open WebUI's 36 tools would take more than half of the fake LM
    Studio's 8,192 tokens, and the tool budget would rightly withhold the MCP tools (not what this test is about)."""

    async def lmstudio_models(self, request: Request) -> Response:
        return JSONResponse({"error": {"message": "not LM Studio"}}, 404)


def scripted(body: dict[str, Any]) -> Turn:
    """The model: calls the two tools, then answers; Open WebUI's background tasks get an empty object."""
    last_user = next(m for m in reversed(body["messages"]) if m["role"] == "user")
    if content_text(last_user.get("content")).lstrip().startswith("### Task:"):
        return Turn(content="{}")
    if content_text(last_user.get("content")) == "Thanks":
        return Turn(content="You are welcome.")
    if any(m["role"] == "tool" for m in body["messages"]):
        return Turn(content="Here are **your pictures**.")
    return Turn(calls=[Call("pictures__picture", {"kilobytes": 40}), Call("pictures__for_you", {})])


@pytest.fixture(scope="module")
def model() -> NotLmStudio:
    return NotLmStudio(default=scripted)


@pytest.fixture(scope="module", params=["details", "reasoning"])
def gateway(model: NotLmStudio, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
            ) -> Iterator[Gateway]:
    with keyed_gateway(model, tmp_path_factory.mktemp("owui-gateway"), {"pictures": stdio_entry("pictures.py")}, KEY,
                       tool_trace=request.param) as gateway:
        yield gateway


@pytest.fixture(scope="module")
def open_webui(gateway: Gateway, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_open_webui(f"{gateway.url}/v1", KEY, MODEL, tmp_path_factory.mktemp("owui-data")) as url:
        yield url


def test_open_webui_shows_the_tools_images_and_the_text_meant_for_the_user(
    open_webui: str, gateway: Gateway, model: NotLmStudio
) -> None:
    from playwright.sync_api import expect

    model.script()  # forget the other trace's requests
    with chat_page(open_webui, f"open_webui_images_{gateway.settings.tools.tool_trace}.png") as tab:
        send(tab, "Show me the pictures")
        expect(tab.get_by_text("your pictures")).to_be_visible(timeout=60_000)
        linked = tab.locator(f'img[src^="{gateway.url}/images/"]')
        inline = tab.locator('img[src^="data:image/png;base64,"]')
        if gateway.settings.tools.tool_trace == "details":
            expect(linked).to_have_count(1, timeout=20_000)  # the 40 KB picture, after the widgets
            expect(inline).to_have_count(1)  # the 2 KB one, in the for_you widget's files
            shown = [linked.first, inline.first]
        else:
            expect(linked).to_have_count(2, timeout=20_000)  # both, under the folded reasoning
            expect(inline).to_have_count(0)
            shown = [linked.first, linked.last]
        tab.wait_for_function("[...document.images].every(image => image.complete)", timeout=10_000)
        widths = [image.evaluate("image => image.naturalWidth") for image in shown]
        assert widths[0] > 100 and widths[1] > 20  # loaded and decoded, not Open WebUI's placeholder
        expect(tab.locator("blockquote", has_text="Your report is ready.")).to_be_visible()
        # The next turn: Open WebUI sends the answer back as it shows it; the model gets the calls back, and
        # nothing that was shown to the person.
        send(tab, "Thanks")
        expect(tab.get_by_text("You are welcome.")).to_be_visible(timeout=60_000)
        [second] = [r for r in model.chat_requests() if content_text(r["messages"][-1]["content"]) == "Thanks"]
        sent = json.dumps(second["messages"])
        assert "/images/" not in sent and "data:image" not in sent and "Saved." not in sent
        assert [m["role"] for m in second["messages"]][-5:] == ["assistant", "tool", "tool", "assistant", "user"]
