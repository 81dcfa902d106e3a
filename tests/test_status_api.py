"""What the status page reads and does (/ui): recent calls, live events, a restart, the playground."""

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Gateway, running_gateway, servers_ready, stdio_entry, wait_for_health
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn


@pytest.fixture(scope="module")
def status(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with running_gateway(tmp_path_factory.mktemp("status"), {"basic": stdio_entry("basic.py")}, ready=("basic",),
                         upstream_url=f"{upstream.url}/v1") as gateway:
        yield gateway


def calls(gateway: Gateway, after: int = 0) -> list[dict[str, Any]]:
    return httpx.get(f"{gateway.url}/ui/calls", params={"after": after}, timeout=30).json()["data"]


def play(gateway: Gateway, body: Any) -> httpx.Response:
    return httpx.post(f"{gateway.url}/ui/playground", json=body, timeout=30)


def test_a_call_made_through_chat_is_in_the_recent_calls(status: Gateway, upstream: FakeUpstream) -> None:
    seen = max([c["number"] for c in calls(status)], default=0)
    upstream.script(Turn(calls=[Call("basic__add", {"a": 2, "b": 3}), Call("basic__fail", {"message": "no"})]),
                    Turn(content="done"))
    response = httpx.post(f"{status.url}/v1/chat/completions", timeout=30,
                          json={"model": MODEL, "messages": [{"role": "user", "content": "add"}]})
    made = sorted(calls(status, seen), key=lambda c: c["tool"])
    assert [(c["tool"], c["outcome"], c["error"]) for c in made] == [("add", "ok", None),
                                                                  ("fail", "error", "tool_error")]
    assert {c["request_id"] for c in made} == {response.headers["x-request-id"]}
    assert all(c["server"] == "basic" and c["duration_ms"] >= 0 and "arguments" not in c for c in made)


def test_values_are_kept_only_when_asked(upstream: FakeUpstream, tmp_path: Path) -> None:
    with running_gateway(tmp_path, {"basic": stdio_entry("basic.py")}, ready=("basic",),
                         upstream_url=f"{upstream.url}/v1", ui_show_values=True) as gateway:
        play(gateway, {"tool": "basic__echo", "arguments": {"text": "private"}})
        [call] = calls(gateway)
    assert json.loads(call["arguments"]) == {"text": "private"}
    assert json.loads(call["result"])["data"] == {"result": "echo: private"}


@pytest.mark.parametrize("show_values", [False, True])
def test_a_tool_error_repeating_its_arguments_is_shown_only_with_the_values(
    upstream: FakeUpstream, tmp_path: Path, show_values: bool
) -> None:
    secret = "ARGSECRET-4 card 4111-1111"
    with (running_gateway(tmp_path, {"basic": stdio_entry("basic.py")}, ready=("basic",),
                          upstream_url=f"{upstream.url}/v1", ui_show_values=show_values) as gateway,
          httpx.stream("GET", f"{gateway.url}/ui/events", timeout=30) as stream):
        lines = stream.iter_lines()
        assert _next_event(lines)[0] == "servers"  # subscribed before the call is made
        upstream.script(Turn(calls=[Call("basic__fail", {"message": secret})]), Turn(content="it failed"))
        httpx.post(f"{gateway.url}/v1/chat/completions", timeout=30,
                   json={"model": MODEL, "messages": [{"role": "user", "content": "fail"}]}).raise_for_status()
        deadline = time.monotonic() + 10
        while (event := _next_event(lines))[0] != "call":
            assert time.monotonic() < deadline, "no call event"
        listed = httpx.get(f"{gateway.url}/ui/calls", timeout=30)
    [call] = listed.json()["data"]
    assert event[1] == call and call["outcome"] == "error"
    if show_values:
        assert call["error"] == f"Error executing tool fail: {secret}"
    else:
        assert call["error"] == "tool_error"
        # the card's whole fragment: a bare "4111" also turns up in a timestamp's digits
        assert "ARGSECRET" not in listed.text and "4111-1111" not in json.dumps(event[1])


def test_the_playground_returns_what_the_model_would_read(status: Gateway) -> None:
    ran = play(status, {"tool": "basic__add", "arguments": {"a": 2, "b": 40}}).json()
    assert (json.loads(ran["content"]), ran["is_error"]) == ({"status": "success", "data": {"result": "42"}}, False)
    wrong = json.loads(play(status, {"tool": "basic__add", "arguments": {"a": "x"}}).json()["content"])
    assert wrong["data"]["error"] == "invalid_arguments"
    unknown = json.loads(play(status, {"tool": "basic__ad", "arguments": {}}).json()["content"])
    assert unknown["data"]["error"] == "unknown_tool" and unknown["data"]["similar_tools"][0] == "basic__add"


@pytest.mark.parametrize(("body", "param"), [({"arguments": {}}, "tool"), ({"tool": "basic__add", "arguments": []},
                                                                            "arguments")])
def test_a_bad_playground_request_is_a_400(status: Gateway, body: Any, param: str) -> None:
    response = play(status, body)
    assert response.status_code == 400 and response.json()["error"]["param"] == param


def test_events_stream_the_servers_and_each_call(status: Gateway) -> None:
    with httpx.stream("GET", f"{status.url}/ui/events", timeout=30) as stream:
        lines = stream.iter_lines()
        first = _next_event(lines)
        assert first[0] == "servers" and first[1]["basic"]["state"] == "ready"
        play(status, {"tool": "basic__echo", "arguments": {"text": "live"}})
        deadline = time.monotonic() + 10
        while (event := _next_event(lines))[0] != "call":
            assert time.monotonic() < deadline, "no call event"
    assert event[1]["tool"] == "echo" and event[1]["outcome"] == "ok"


def _next_event(lines: Iterator[str]) -> tuple[str, Any]:
    name = ""
    for line in lines:
        if line.startswith("event:"):
            name = line.split(":", 1)[1].strip()
        elif line.startswith("data:") and name:
            return name, json.loads(line.split(":", 1)[1])
    raise AssertionError("the stream ended")


def test_a_server_is_restarted_on_request(status: Gateway) -> None:
    before = httpx.get(f"{status.url}/health", timeout=30).json()["servers"]["basic"].get("restarts", 0)
    response = httpx.post(f"{status.url}/ui/servers/basic/restart", timeout=30, json=None,
                          headers={"Content-Type": "application/json"})  # as the page sends it (tests/security/)
    assert response.status_code == 202
    body = wait_for_health(status.url, lambda b: servers_ready("basic")(b) and
                           b["servers"]["basic"].get("restarts") == before + 1)
    assert body["servers"]["basic"].get("last_error") is None  # a restart asked for is no error
    ran = play(status, {"tool": "basic__add", "arguments": {"a": 1, "b": 1}}).json()
    assert json.loads(ran["content"])["data"] == {"result": "2"}
    missing = httpx.post(f"{status.url}/ui/servers/nope/restart", timeout=30,
                         headers={"Content-Type": "application/json"})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "server_not_found"


def test_a_web_page_elsewhere_cannot_run_a_tool(status: Gateway) -> None:
    seen = max([c["number"] for c in calls(status)], default=0)
    response = httpx.post(f"{status.url}/ui/playground", timeout=30, headers={"Origin": "http://evil.example"},
                          json={"tool": "basic__echo", "arguments": {"text": "x"}})
    assert response.status_code == 403 and response.json()["error"]["code"] == "origin_not_allowed"
    assert calls(status, seen) == []


def test_a_call_to_a_tool_that_does_not_exist_is_shown_but_not_counted(status: Gateway, upstream: FakeUpstream) -> None:
    seen = max([c["number"] for c in calls(status)], default=0)
    upstream.script(Turn(calls=[Call("basic__made_up", {"x": 1})]), Turn(content="sorry"))
    httpx.post(f"{status.url}/v1/chat/completions", timeout=30,
               json={"model": MODEL, "messages": [{"role": "user", "content": "use a tool"}]})
    [call] = calls(status, seen)
    assert (call["server"], call["tool"], call["outcome"]) == (None, "basic__made_up", "unknown_tool")
    assert call["error"] == "unknown_tool"  # the gateway's message repeats the model's words: values only
    assert "made_up" not in httpx.get(f"{status.url}/metrics", timeout=30).text  # no label per made-up name
