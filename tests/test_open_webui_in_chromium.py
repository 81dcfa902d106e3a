"""Issue 28's main case, in Open WebUI itself (opt-in, see tests/support/open_webui.py): beside Open WebUI's own
36 tools, with an upstream that reports an 8k context as LM Studio does, "What time is it in UTC?" runs the MCP
time server's tool, and the next turn's model has that call and its result back.

Open WebUI -> the gateway (keys set, the default trace) -> a scripted upstream that reports LM Studio's loaded
context of 8,192 tokens and calls the time tool when it is offered. Screenshot: test-artifacts/open_webui_time.png.
"""

from collections.abc import Iterator
from typing import Any

import pytest

from app.openai.schemas import content_text
from tests.conftest import Gateway
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn
from tests.support.open_webui import chat_page, keyed_gateway, running_open_webui, send, skip_without_open_webui

KEY = "sk-owui-key"
skip_without_open_webui()


def _time_tool(body: dict[str, Any]) -> str | None:
    names = [tool["function"]["name"] for tool in body.get("tools") or []]
    return next((name for name in names if name.endswith("get_current_time")), None)


def scripted(body: dict[str, Any]) -> Turn:
    """The model: calls the time tool when it is offered and not yet called, then reads its result back."""
    messages = body["messages"]
    last_user = content_text(next(m for m in reversed(messages) if m["role"] == "user").get("content"))
    if last_user.lstrip().startswith("### Task:"):
        return Turn(content="{}")
    results = [content_text(m.get("content")) for m in messages if m["role"] == "tool"]
    if last_user == "What did the tool say?":
        return Turn(content=f"It said: {results[-1][:60]}" if results else "No tool ran before.")
    if results:
        return Turn(content="It is **time-checked** in UTC.")
    tool = _time_tool(body)
    if tool is None:
        return Turn(content="I have no clock.")
    return Turn(calls=[Call(tool, {"timezone": "UTC"})])


@pytest.fixture(scope="module")
def model() -> FakeUpstream:
    return FakeUpstream(default=scripted)  # it answers /api/v1/models with a loaded context of 8,192 tokens


@pytest.fixture(scope="module")
def gateway(model: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with keyed_gateway(model, tmp_path_factory.mktemp("owui-gateway"), {"time": {"command": "mcp-server-time"}},
                       KEY) as gateway:
        yield gateway


@pytest.fixture(scope="module")
def open_webui(gateway: Gateway, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_open_webui(f"{gateway.url}/v1", KEY, MODEL, tmp_path_factory.mktemp("owui-data")) as url:
        yield url


def test_at_an_8k_context_open_webui_gets_the_mcp_time_tool_and_the_next_turn_remembers_it(
    open_webui: str, gateway: Gateway, model: FakeUpstream
) -> None:
    from playwright.sync_api import expect

    with chat_page(open_webui, "open_webui_time.png") as tab:
        send(tab, "What time is it in UTC?")
        expect(tab.get_by_text("time-checked")).to_be_visible(timeout=60_000)
        [first] = [r for r in model.chat_requests() if r["messages"][-1].get("content") == "What time is it in UTC?"]
        offered = [tool["function"]["name"] for tool in first["tools"]]
        assert _time_tool(first) is not None and len(offered) > 36  # Open WebUI's own 36, and ours beside them
        send(tab, "What did the tool say?")
        expect(tab.get_by_text("It said:")).to_be_visible(timeout=60_000)
        [second] = [r for r in model.chat_requests() if r["messages"][-1].get("content") == "What did the tool say?"]
        roles = [m["role"] for m in second["messages"]]
        assert roles[-5:] == ["user", "assistant", "tool", "assistant", "user"]  # the call and its result, back
        assert "UTC" in content_text(second["messages"][-3]["content"])
        expect(tab.get_by_text("No tool ran before.")).to_have_count(0)
