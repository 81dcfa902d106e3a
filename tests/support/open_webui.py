"""Open WebUI itself, for the opt-in tests that drive it in Chromium (tests/test_open_webui_*.py).

Open WebUI is far too large for the project's dependencies, so it runs from a virtualenv of its own, named by
TOOLBRIDGE_TEST_OPEN_WEBUI (its `open-webui` command); without it those tests are skipped:

    python3 -m venv /work/owui-venv && /work/owui-venv/bin/pip install open-webui==0.12.4
    TOOLBRIDGE_TEST_OPEN_WEBUI=/work/owui-venv/bin/open-webui .venv/bin/pytest tests/test_open_webui_images.py \
        tests/test_open_webui_in_chromium.py -n 0

Offline: no login, no Ollama, no model downloads.
"""

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.openai.schemas import content_text
from tests.conftest import Gateway, running_gateway
from tests.support.fake_upstream import MODEL, FakeUpstream, Turn
from tests.support.servers import ServerThread

OPEN_WEBUI = os.environ.get("TOOLBRIDGE_TEST_OPEN_WEBUI", "")
CHROMIUM = shutil.which("chromium")
ARTIFACTS = Path(__file__).parent.parent.parent / "test-artifacts"
START_TIMEOUT = 240.0  # Open WebUI imports for a minute on two busy cores


def skip_without_open_webui() -> None:
    if not OPEN_WEBUI or CHROMIUM is None:
        pytest.skip("opt-in: set TOOLBRIDGE_TEST_OPEN_WEBUI to an open-webui command (and install chromium)",
                    allow_module_level=True)


@contextmanager
def keyed_gateway(model: FakeUpstream, tmp: Path, servers: dict[str, Any], key: str, **settings: Any
                  ) -> Iterator[Gateway]:
    """The gateway each test puts Open WebUI in front of: its servers ready, one key, the scripted model upstream."""
    with ServerThread(model.app) as upstream, running_gateway(
        tmp, servers, ready=tuple(servers), key=key, upstream_url=f"{upstream.url}/v1", api_keys=key, **settings,
    ) as gateway:
        yield gateway


ScriptedModel = Callable[[dict[str, Any]], Turn]


def scripted_chat(name: str, key: str, servers: dict[str, Any], scripted: ScriptedModel, **settings: Any
                  ) -> tuple[Any, Any, Any]:
    """The three module fixtures of a test that chats through Open WebUI: `model` (the scripted upstream), `gateway`
    (keyed_gateway with `servers` and `settings`) and `open_webui` (in front of it). A module assigns them:
    `model, gateway, open_webui = scripted_chat(...)`."""

    @pytest.fixture(scope="module")
    def model() -> FakeUpstream:
        return FakeUpstream(default=scripted)

    @pytest.fixture(scope="module")
    def gateway(model: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
        with keyed_gateway(model, tmp_path_factory.mktemp(name), servers, key, **settings) as gateway:
            yield gateway

    @pytest.fixture(scope="module")
    def open_webui(gateway: Gateway, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
        with running_open_webui(f"{gateway.url}/v1", key, MODEL, tmp_path_factory.mktemp(f"{name}-data")) as url:
            yield url

    return model, gateway, open_webui


@contextmanager
def running_open_webui(api_url: str, key: str, model: str, data: Path, *, ollama: bool = False) -> Iterator[str]:
    """Open WebUI on a free port with one OpenAI connection (`api_url`, `key`), or with `ollama` one Ollama
    connection instead (`api_url` its base URL, without /api); yields its URL."""
    from tests.support.servers import free_port

    port = free_port()
    connection = {"ENABLE_OLLAMA_API": "False", "OPENAI_API_BASE_URL": api_url, "OPENAI_API_KEY": key}
    if ollama:  # the connection's key is in its per-connection config, by the connection's index
        connection = {"ENABLE_OPENAI_API": "False", "ENABLE_OLLAMA_API": "True", "OLLAMA_BASE_URL": api_url,
                      "OLLAMA_API_CONFIGS": json.dumps({"0": {"enable": True, "key": key}})}
    env = {
        **os.environ, "DATA_DIR": str(data), "WEBUI_AUTH": "False", "WEBUI_SECRET_KEY": "test-only",
        "OFFLINE_MODE": "True", "HF_HUB_OFFLINE": "1", "DEFAULT_MODELS": model, **connection,
    }
    log = (data / "open-webui.log").open("wb")
    process = subprocess.Popen([OPEN_WEBUI, "serve", "--host", "127.0.0.1", "--port", str(port)], env=env,
                               stdout=log, stderr=subprocess.STDOUT, cwd=data, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            assert process.poll() is None, (data / "open-webui.log").read_text()[-3000:]
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "Open WebUI did not start"
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


@contextmanager
def chat_page(url: str, screenshot: str) -> Iterator[Any]:
    """A Chromium tab on Open WebUI's new chat, its prompt ready; a full-page screenshot when done."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        tab = browser.new_page(viewport={"width": 1280, "height": 1000})
        try:
            tab.goto(url)
            tab.locator("#chat-input").wait_for(timeout=60_000)
            tab.keyboard.press("Escape")  # a "what's new" dialog, when there is one
            yield tab
        finally:
            ARTIFACTS.mkdir(exist_ok=True)  # also when it failed: what the person saw
            tab.screenshot(path=str(ARTIFACTS / screenshot), full_page=True)
            browser.close()


def send(tab: Any, text: str) -> None:
    tab.locator("#chat-input").click()
    tab.keyboard.type(text)
    tab.keyboard.press("Enter")


@dataclass(frozen=True)
class PersonAsked:
    """What a scripted model reads of a request: the person's last message, and the tool results since."""

    text: str
    results: list[str]


def person_asked(body: dict[str, Any]) -> PersonAsked | None:
    """The person's last message and the tool results after it (as `tool_result` reads them); None for Open
    WebUI's own background tasks (titles, tags, follow-ups), which a scripted model answers with `{}`."""
    messages = body["messages"]
    last = max(i for i, m in enumerate(messages) if m["role"] == "user")
    text = content_text(messages[last].get("content"))
    if text.lstrip().startswith("### Task:"):
        return None
    return PersonAsked(text, [tool_result(m.get("content")) for m in messages[last:] if m["role"] == "tool"])


def offered_name(body: dict[str, Any], tool: str, server: str | None = None) -> str | None:
    """The name the gateway offers an MCP server's `tool` under in a request (Open WebUI's own tools beside it);
    `server` picks one when two servers have a tool of that name."""
    names = [offered["function"]["name"] for offered in body.get("tools") or []]
    wanted = f"{server}__{tool}" if server else None
    return next((name for name in names if name == wanted or (wanted is None and name.endswith(f"__{tool}"))), None)


def tool_result(content: Any) -> str:
    """A tool message's text: the server's own result when the gateway wrapped it as JSON (a result, or several
    text blocks as a list, one a line), else the text."""
    text = content_text(content)
    try:
        data = json.loads(text)["data"]
        if isinstance(data, list) and all(isinstance(block, str) for block in data):
            return "\n".join(data)
        return str(data["result"])
    except (ValueError, KeyError, TypeError):
        return text
