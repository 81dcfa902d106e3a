"""Claude Code 2.1.197 itself through the Messages door (opt-in, see tests/support/claude_code.py), in print mode as
docs/doors.md connects it: an MCP tool called with its trace in the thinking block, a call that waits for the
person's yes and runs on `--continue`, and what the person reads when the model server is down or the key is
wrong: the gateway's words at the first answer (issue 45, C2: it retried the 502 and the 401 ten times and printed
nothing for three minutes).

Claude Code -> the gateway (a key, the basic MCP server, its echo tool asking first in one test) -> a scripted
model server that calls the echo tool when the person asks for an echo.
"""

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.openai.schemas import content_text
from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.claude_code import Printed, claude, person_said, skip_without_claude_code
from tests.support.fake_upstream import MODEL, Call, Turn
from tests.support.model_server import ModelServer

KEY = "sk-claude-code"
skip_without_claude_code()


def scripted(body: dict[str, Any]) -> Turn:
    """The model: calls the echo tool for "echo WORD", then says what it returned; says hello otherwise."""
    said = person_said(body)
    results = [content_text(m.get("content")) for m in body["messages"] if m["role"] == "tool"]
    if results and "echo" in said.lower():
        return Turn(content=f"The echo tool answered: {results[-1][:80]}")
    echo = next((tool["function"]["name"] for tool in body.get("tools") or []
                 if tool["function"]["name"].endswith("__echo")), None)
    word = re.search(r"echo the word (\w+)", said, re.IGNORECASE)
    if word and echo:
        return Turn(calls=[Call(echo, {"text": word.group(1)})])
    return Turn(content="Hello from the scripted model.")


@pytest.fixture
def model() -> Iterator[ModelServer]:
    server = ModelServer(default=scripted).start()
    yield server
    server.stop()


def gateway_for(model: ModelServer, tmp_path: Path, **basic: Any) -> Any:
    return running_gateway(tmp_path / "gateway", {"basic": stdio_entry("basic.py") | basic}, ready=("basic",),
                           key=KEY, upstream_url=model.base, api_keys=KEY)


def run(gateway: Gateway, home: Path, prompt: str, *flags: str, key: str = KEY) -> Printed:
    return claude(home, gateway.url, key, MODEL, prompt, *flags)


def posts_answered(gateway: Gateway, status: int, route: str = "/v1/messages") -> float:
    """How many POSTs the gateway answered with `status` (its metrics; a refused key is "unmatched", before routing)."""
    metrics = httpx.get(f"{gateway.url}/metrics", headers={"Authorization": f"Bearer {KEY}"}, timeout=30).text
    line = f'toolbridge_requests_total{{method="POST",route="{route}",status="{status}"}} '
    return sum(float(row.removeprefix(line)) for row in metrics.splitlines() if row.startswith(line))


def test_an_mcp_tool_runs_and_its_trace_is_the_thinking_block(model: ModelServer, tmp_path: Path) -> None:
    (tmp_path / "gateway").mkdir()
    with gateway_for(model, tmp_path) as gateway:
        printed = run(gateway, tmp_path / "home", "Echo the word parsnip, please.")
    assert not printed.is_error, printed.result
    [trace] = printed.blocks("thinking")
    assert trace.startswith('Calling basic__echo({"text": "parsnip"})\nbasic__echo ok in ')
    assert "echo: parsnip" in printed.result and printed.result.startswith("The echo tool answered:")


def test_a_call_that_asks_first_runs_after_yes_on_continue(model: ModelServer, tmp_path: Path) -> None:
    (tmp_path / "gateway").mkdir()
    with gateway_for(model, tmp_path, confirm=["echo"]) as gateway:
        asked = run(gateway, tmp_path / "home", "Echo the word turnip, please.")
        assert "needs your approval" in asked.result and "**basic__echo** on the server **basic**" in asked.result
        assert "Reply **yes** to run it" in asked.result
        assert not any("turnip" in content_text(m.get("content")) for body in model.chat_requests()
                       for m in body["messages"] if m["role"] == "tool")  # nothing ran before the yes
        answered = run(gateway, tmp_path / "home", "yes", "--continue")
    assert not answered.is_error, answered.result
    assert "echo: turnip" in answered.result


def test_with_the_model_server_down_the_person_reads_why_at_the_first_answer(
    model: ModelServer, tmp_path: Path
) -> None:
    (tmp_path / "gateway").mkdir()
    with gateway_for(model, tmp_path) as gateway:
        model.stop()  # the person quit LM Studio
        down = run(gateway, tmp_path / "home", "hello")
        wrong = run(gateway, tmp_path / "home", "hello", key="sk-wrong")
        assert posts_answered(gateway, 502) == 1  # one request: no retry (before: ten, three minutes)
        assert posts_answered(gateway, 401, "unmatched") == 1
    assert down.is_error and down.result.startswith("API Error: 502 Cannot reach the upstream model server")
    assert "Start LM Studio's local server" in down.result
    assert wrong.is_error and wrong.result == "Failed to authenticate. API Error: 401 Incorrect API key."
