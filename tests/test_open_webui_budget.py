"""Open WebUI's 36 tools beside ours in an 8k context (issue 28): the MCP tools the question needs still reach
the model, and what the budget left out is said where a person looks: `POST /tools`, a warning in the log,
and the status page's recent requests.

The upstream is the fake LM Studio, whose qwen3-8b is loaded with an 8,192-token context; Open WebUI's tools
are the eval's fixture (bench/eval/fixtures/open_webui_tools.json, taken from Open WebUI 0.12.4), about
23,000 characters: more than the 12,288 of tool definitions half of that context holds.
"""

import json
import os
import shutil
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import sync_playwright
from structlog.testing import capture_logs

from bench.eval.tasks import client_tools
from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn, last_tool_results

OPEN_WEBUI = client_tools("open_webui")
OPEN_WEBUI_NAMES = {tool["function"]["name"] for tool in OPEN_WEBUI}
QUESTION = [{"role": "user", "content": "What time is it in UTC?"}]


@pytest.fixture(scope="module")
def gateway(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    # mcp-server-time, and the basic test server's 12 tools: 14 MCP tools, too many for what is left.
    servers = {"time": {"command": "mcp-server-time"}, "basic": stdio_entry("basic.py")}
    with running_gateway(tmp_path_factory.mktemp("owui"), servers, ready=tuple(servers),
                         upstream_url=f"{upstream.url}/v1", tool_budget=24) as gateway:
        yield gateway


def names(tools: list[dict[str, Any]]) -> list[str]:
    return [tool["function"]["name"] for tool in tools]


def test_the_time_question_reaches_the_model_with_the_time_tool_beside_open_webuis_tools(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    upstream.script(Turn(calls=[Call("time__get_current_time", {"timezone": "UTC"})]), Turn(content="It is noon."))
    answer = gateway.client().chat.completions.create(model=MODEL, messages=QUESTION, tools=OPEN_WEBUI)
    first, second = upstream.chat_requests()
    offered = names(first["tools"])
    assert "time__get_current_time" in offered
    assert set(offered) >= OPEN_WEBUI_NAMES  # the client's own tools are never dropped
    [result] = last_tool_results(second).values()
    assert json.loads(result)["status"] == "success" and "UTC" in result  # the MCP tool ran
    assert answer.choices[0].message.content == "It is noon."


def test_post_tools_says_what_a_whole_request_is_offered_and_what_is_withheld(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    body = {"model": MODEL, "messages": QUESTION, "tools": OPEN_WEBUI}
    listed = httpx.post(f"{gateway.url}/tools", json=body).json()
    by_name = {tool["function"]["name"]: tool for tool in listed["data"]}
    assert {name for name, tool in by_name.items() if tool.get("client")} == OPEN_WEBUI_NAMES
    assert all(by_name[name]["offered"] for name in OPEN_WEBUI_NAMES)
    assert by_name["time__get_current_time"]["offered"] and by_name["time__get_current_time"]["server"] == "time"
    withheld = [name for name, tool in by_name.items() if not tool["offered"]]
    assert withheld and sorted(listed["withheld"]) == sorted(withheld)
    assert "8192-token context" in listed["why"] and "the client's own 36 tools" in listed["why"]
    # What a chat with this body is sent, exactly.
    upstream.script(Turn(content="ok"))
    gateway.client().chat.completions.create(**body)
    sent = upstream.chat_requests()[0]["tools"]
    assert sorted(names(sent)) == sorted(name for name, tool in by_name.items() if tool["offered"])
    assert [t["function"] for t in sent[:36]] == [by_name[n]["function"] for n in names(sent[:36])]


def test_post_tools_takes_only_what_a_chat_request_may_be(gateway: Gateway) -> None:
    as_form = httpx.post(f"{gateway.url}/tools", content=json.dumps({"model": MODEL, "messages": QUESTION}),
                         headers={"Content-Type": "text/plain"})
    assert as_form.status_code == 400 and as_form.json()["error"]["code"] == "invalid_content_type"
    no_messages = httpx.post(f"{gateway.url}/tools", json={"model": MODEL})
    assert no_messages.status_code == 400 and no_messages.json()["error"]["param"] == "messages"
    foreign = httpx.post(f"{gateway.url}/tools", json={"model": MODEL, "messages": QUESTION},
                         headers={"Origin": "https://evil.example"})
    assert foreign.status_code == 403


def test_a_warning_names_how_many_tools_were_withheld_and_why(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="ok"))
    with capture_logs() as logs:
        gateway.client().chat.completions.create(model=MODEL, messages=QUESTION, tools=OPEN_WEBUI)
    [line] = [entry for entry in logs if entry["event"] == "tools_withheld"]
    sent = names(upstream.chat_requests()[0]["tools"])
    assert line["log_level"] == "warning"
    assert line["withheld"] == len(line["names"]) == 14 + 36 - len(sent) > 0
    assert "past half of the model's 8192-token context" in line["why"]
    assert line["client_tools"] == 36


def test_the_status_page_shows_the_request_and_its_withheld_tools(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="ok"))
    raw = gateway.client().chat.completions.with_raw_response.create(model=MODEL, messages=QUESTION,
                                                                     tools=OPEN_WEBUI)
    request_id = raw.headers["x-request-id"]
    sent = names(upstream.chat_requests()[0]["tools"])
    [entry] = [e for e in httpx.get(f"{gateway.url}/ui/requests").json()["data"] if e["request_id"] == request_id]
    assert entry["model"] == MODEL and entry["tools_offered"] == len(sent)
    assert entry["tools_withheld"] == 14 + 36 - len(sent) > 0 and "8192-token context" in entry["why"]
    assert not set(entry["withheld"]) & set(sent)


def test_the_status_page_lists_the_request_with_its_withheld_count(gateway: Gateway, upstream: FakeUpstream) -> None:
    chromium = shutil.which("chromium")
    if chromium is None and not os.environ.get("CI"):
        pytest.skip("Chromium not installed: apt-get install chromium")
    assert chromium is not None, "CI must install Chromium: apt-get install chromium"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        tab = browser.new_page()
        tab.goto(f"{gateway.url}/")
        tab.wait_for_selector("#live.ok")
        upstream.script(Turn(content="ok"))
        raw = gateway.client().chat.completions.with_raw_response.create(model=MODEL, messages=QUESTION,
                                                                         tools=OPEN_WEBUI)
        row = tab.locator(f"#requests tr[data-request={raw.headers['x-request-id']}]")
        row.wait_for(timeout=5000)  # the live event: at once, bounded so a broken page fails
        withheld = 14 + 36 - len(upstream.chat_requests()[0]["tools"])
        assert row.locator("td").nth(3).inner_text() == "Chat Completions"  # the API it came through
        assert row.locator("td").nth(5).inner_text() == str(withheld) != "0"
        assert "8192-token context" in row.locator("td").nth(6).inner_text()
        browser.close()
