"""Open WebUI's Ollama connection pointed at the gateway (opt-in, see tests/support/open_webui.py): its OpenAI
connection off, it lists the models through /api/tags and chats through /api/chat, and a chat in Chromium
answers from the MCP echo tool; the next turn's model has that call and its result back.

Open WebUI -> the gateway's Ollama door (a key set) -> a scripted upstream that calls the echo tool when it is
offered. Screenshot: test-artifacts/open_webui_ollama.png.
"""

from collections.abc import Iterator
from typing import Any

import pytest

from app.openai.schemas import content_text
from tests.conftest import Gateway, stdio_entry
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn
from tests.support.open_webui import (
    chat_page,
    keyed_gateway,
    offered_name,
    person_asked,
    running_open_webui,
    send,
    skip_without_open_webui,
)

KEY = "sk-owui-ollama"
ASK = "Echo the word parsnip, please."
skip_without_open_webui()


def scripted(body: dict[str, Any]) -> Turn:
    """The model: calls the echo tool when it is offered and not yet called, then says what it returned."""
    asked = person_asked(body)
    if asked is None:
        return Turn(content="{}")  # Open WebUI's background tasks (title, tags, follow-ups)
    if asked.text == "What did the tool say?":
        results = [content_text(m.get("content")) for m in body["messages"] if m["role"] == "tool"]
        return Turn(content=f"Earlier it said: {results[-1][:60]}" if results else "No tool ran before.")
    if asked.results:
        return Turn(content=f"The echo tool said **{asked.results[-1]}** through Ollama's API.")
    echo = offered_name(body, "echo")
    return Turn(calls=[Call(echo, {"text": "parsnip"})]) if echo else Turn(content="I have no echo tool.")


@pytest.fixture(scope="module")
def model() -> FakeUpstream:
    return FakeUpstream(default=scripted)


@pytest.fixture(scope="module")
def gateway(model: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with keyed_gateway(model, tmp_path_factory.mktemp("owui-ollama-gateway"), {"basic": stdio_entry("basic.py")},
                       KEY) as gateway:
        yield gateway


@pytest.fixture(scope="module")
def open_webui(gateway: Gateway, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("owui-ollama-data")
    with running_open_webui(gateway.url, KEY, MODEL, data, ollama=True) as url:  # the base URL: no /v1, no /api
        yield url


def test_open_webui_s_ollama_connection_answers_from_the_mcp_tool_and_remembers_it(
    open_webui: str, model: FakeUpstream
) -> None:
    from playwright.sync_api import expect

    with chat_page(open_webui, "open_webui_ollama.png") as tab:
        send(tab, ASK)
        expect(tab.get_by_text("through Ollama's API")).to_be_visible(timeout=60_000)
        tab.get_by_text("Thought for").first.click()  # the tool trace, as Ollama's `thinking`: Open WebUI's reasoning
        expect(tab.get_by_text("basic__echo").first).to_be_visible()
        [first] = [r for r in model.chat_requests() if content_text(r["messages"][-1].get("content")) == ASK]
        assert offered_name(first, "echo") == "basic__echo"
        send(tab, "What did the tool say?")
        expect(tab.get_by_text("Earlier it said:")).to_be_visible(timeout=60_000)
        [second] = [r for r in model.chat_requests() if r["messages"][-1].get("content") == "What did the tool say?"]
        assert [m["role"] for m in second["messages"]][-5:] == ["user", "assistant", "tool", "assistant", "user"]
        assert "parsnip" in content_text(second["messages"][-3]["content"])
