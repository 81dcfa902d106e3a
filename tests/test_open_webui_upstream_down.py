"""Issue 45, C1, in Open WebUI itself (opt-in, see tests/support/open_webui.py): with LM Studio down, Open WebUI said
"Model '' was not found" (its OpenAI connection) or "Model 'qwen3-8b' was not found" (its Ollama connection),
because the gateway answered the model list with a 502 and the chat that carries the gateway's words was never
sent. Now the list answers with the last one the model server gave, so the person's "hello" reaches the gateway,
and the chat shows why nothing answers: "Cannot reach the upstream model server ... Start LM Studio's local server".

For each connection: Open WebUI -> the gateway (a key) -> a scripted model server that answers once, then is
stopped. Screenshots: test-artifacts/open_webui_down_openai.png, open_webui_down_ollama.png.
"""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import running_gateway, stdio_entry
from tests.support.fake_upstream import MODEL, Turn
from tests.support.model_server import ModelServer
from tests.support.open_webui import chat_page, running_open_webui, send, skip_without_open_webui

KEY = "sk-owui-down"
HINT = "Start LM Studio's local server"
ANSWER_TIMEOUT_MS = 60_000
skip_without_open_webui()


@pytest.fixture
def model() -> Iterator[ModelServer]:
    server = ModelServer(default=lambda body: Turn(content="Hello, I am here."))
    server.start()
    yield server
    server.stop()


@pytest.mark.parametrize("connection", ["openai", "ollama"])
def test_with_the_model_server_down_the_chat_says_to_start_it(
    model: ModelServer, tmp_path: Path, connection: str
) -> None:
    from playwright.sync_api import expect

    ollama = connection == "ollama"
    (tmp_path / "gateway").mkdir()
    (tmp_path / "owui").mkdir()
    with running_gateway(tmp_path / "gateway", {"basic": stdio_entry("basic.py")}, ready=("basic",), key=KEY,
                         upstream_url=model.base, api_keys=KEY) as gateway:
        api = gateway.url if ollama else f"{gateway.url}/v1"
        with running_open_webui(api, KEY, MODEL, tmp_path / "owui", ollama=ollama) as open_webui:
            with chat_page(open_webui, f"open_webui_up_{connection}.png") as tab:
                send(tab, "hello")
                expect(tab.get_by_text("Hello, I am here.")).to_be_visible(timeout=ANSWER_TIMEOUT_MS)
            model.stop()  # the person quits LM Studio, then opens Open WebUI again
            with chat_page(open_webui, f"open_webui_down_{connection}.png") as tab:
                send(tab, "hello")
                expect(tab.get_by_text(HINT).first).to_be_visible(timeout=ANSWER_TIMEOUT_MS)
                assert tab.get_by_text("was not found").count() == 0
