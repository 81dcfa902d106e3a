"""Open WebUI's habits: background task prompts get no tools, its user headers reach the log, and its tool
widget shows what a call did."""

import html
import re
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from structlog.testing import capture_logs

from app.chat.clients import is_background_task, openwebui_fields
from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import Call, FakeUpstream, Turn

TITLE_PROMPT = "### Task:\nGenerate a concise, 3-5 word title with an emoji summarizing the chat history."


@pytest.mark.parametrize(
    ("messages", "task"),
    [
        ([{"role": "user", "content": TITLE_PROMPT}], True),
        ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"},
          {"role": "user", "content": [{"type": "text", "text": "  ### Task: tags"}]}], True),
        ([{"role": "user", "content": "What is ### Task:?"}], False),
        ([{"role": "user", "content": TITLE_PROMPT}, {"role": "user", "content": "real question"}], False),
        ([{"role": "system", "content": "### Task: in system only"}], False),
    ],
)
def test_background_tasks_are_recognised(messages: list, task: bool) -> None:
    assert is_background_task(messages) is task


def test_openwebui_headers_become_log_fields() -> None:
    headers = {"x-openwebui-user-name": "Ana%20Silva", "x-openwebui-chat-id": "c-1", "authorization": "Bearer k"}
    assert openwebui_fields(headers) == {"owui_user_name": "Ana Silva", "owui_chat_id": "c-1"}


def test_task_prompts_get_no_tools_but_chats_do(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="🌤 Weather chat"), Turn(content="ok"))
    client = gateway.client()
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": TITLE_PROMPT}])
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hello"}])
    task, chat = upstream.chat_requests()
    assert "tools" not in task and task["messages"] == [{"role": "user", "content": TITLE_PROMPT}]
    assert chat["tools"] and chat["messages"][0]["role"] == "system"


def test_the_task_rule_can_be_turned_off(upstream: FakeUpstream, tmp_path: Path) -> None:
    with running_gateway(tmp_path, {"basic": stdio_entry("basic.py")}, ready=("basic",),
                         upstream_url=f"{upstream.url}/v1", skip_tools_for_tasks=False) as gateway:
        upstream.script(Turn(content="title"))
        client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="x", max_retries=0)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": TITLE_PROMPT}])
    assert upstream.chat_requests()[0]["tools"]


def test_openwebui_user_and_chat_are_in_the_request_log(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="ok"))
    headers = {"X-OpenWebUI-User-Name": "Ana%20Silva", "X-OpenWebUI-User-Id": "u-7",
               "X-OpenWebUI-User-Email": "ana@example.com", "X-OpenWebUI-User-Role": "user",
               "X-OpenWebUI-Chat-Id": "chat-42"}
    with capture_logs() as logs:
        gateway.client(default_headers=headers).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
    [line] = [e for e in logs if e["event"] == "request" and e["path"] == "/v1/chat/completions"]
    assert {k: line[k] for k in ("owui_user_name", "owui_user_id", "owui_chat_id")} == {
        "owui_user_name": "Ana Silva", "owui_user_id": "u-7", "owui_chat_id": "chat-42"
    }


def widgets(content: str) -> list[dict[str, str]]:
    """Each tool widget's attributes, in order, as Open WebUI reads them (HTML-unescaped)."""
    openings = re.findall(r'^<details type="tool_calls"[^\n]*>$', content, re.MULTILINE)
    return [{name: html.unescape(value) for name, value in re.findall(r'(\w+)="([^"]*)"', o)} for o in openings]


@pytest.fixture(scope="module")
def widened(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    servers = {"basic": stdio_entry("basic.py"), "wide": stdio_entry("wide.py")}
    with running_gateway(tmp_path_factory.mktemp("widget"), servers, ready=("basic", "wide"),
                         upstream_url=f"{upstream.url}/v1", tool_trace="details") as gateway:
        yield gateway


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_tool_widget_marks_a_failure_and_shows_text_as_text(
    widened: Gateway, upstream: FakeUpstream, stream: bool
) -> None:
    # Open WebUI 0.12.4's widget (ToolCallDisplay) shows a red mark instead of its green check for status="failed"
    # or a result starting "Error:", and decodes `result` as JSON while it can: a string shows as text.
    upstream.script(Turn(calls=[Call("basic__fail", {"message": "no such zone"}), Call("wide__document", {"lines": 2}),
                                Call("wide__document", {"lines": 500})]), Turn(content="Done."))
    client = widened.client()
    ask = [{"role": "user", "content": "try them"}]
    if stream:
        chunks = client.chat.completions.create(model="m", messages=ask, stream=True)  # type: ignore[arg-type]
        content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        content = client.chat.completions.create(model="m", messages=ask).choices[0].message.content or ""  # type: ignore[arg-type]
    failed, short, long = widgets(content)
    assert failed["status"] == "failed"
    assert failed["result"] == "Error executing tool fail: no such zone"  # the MCP SDK's words, as they came
    assert "status" not in short and "status" not in long
    assert short["result"] == "Line 1 of the document.\nLine 2 of the document."
    assert long["result"].startswith("Line 1 of the document.\nLine 2") and long["result"].endswith("…")
