"""Ollama's API's door, driven by the official `ollama` library over real HTTP (and read raw where the library
would hide a mistake): the chat answered from the MCP tool streamed and whole, the client's own tools handed
back and finished, images, the model list, and errors in Ollama's shape."""

import base64
import json
import re
from pathlib import Path

import httpx
import ollama
import pytest

from tests.conftest import Gateway, running_gateway
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn
from tests.test_cli import lines_across_shutdown, serving

ASK = [{"role": "user", "content": "Echo hi, please."}]
ANSWER = "The tool said hi."
CITY = {"type": "object", "properties": {"city": {"type": "string"}}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather", "parameters": CITY}}
TIME = {"type": "function", "function": {"name": "get_time", "description": "The time",
                                         "parameters": {"type": "object", "properties": {}}}}
RFC3339_NANOS = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z"


def client(gateway: Gateway, **options: object) -> ollama.Client:
    return ollama.Client(host=gateway.url, **options)


def echo_then_answer(upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="Let me check.", calls=[Call("basic__echo", {"text": "hi"})]), Turn(content=ANSWER))


def test_whole_answer_comes_from_the_mcp_tool_with_the_trace_as_thinking(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    echo_then_answer(upstream)
    response = client(gateway).chat(model=MODEL, messages=ASK, stream=False)
    assert response.message.role == "assistant"
    assert response.message.content == f"Let me check.\n\n{ANSWER}"
    assert "basic__echo" in (response.message.thinking or "")
    assert response.done and response.done_reason == "stop" and response.model == MODEL
    assert (response.prompt_eval_count, response.eval_count) == (20, 10)  # two rounds' usage, summed
    durations = [response.load_duration, response.prompt_eval_duration, response.eval_duration]
    assert all(isinstance(d, int) and d >= 0 for d in durations) and sum(durations) == response.total_duration  # type: ignore[arg-type]
    first, second = upstream.chat_requests()
    assert "basic__echo" in [tool["function"]["name"] for tool in first["tools"]]
    assert second["messages"][-1]["role"] == "tool" and "hi" in second["messages"][-1]["content"]


def test_streamed_by_default_as_ndjson_lines_ollama_writes(gateway: Gateway, upstream: FakeUpstream) -> None:
    echo_then_answer(upstream)
    with httpx.stream("POST", f"{gateway.url}/api/chat", json={"model": MODEL, "messages": ASK}, timeout=30) as raw:
        assert raw.status_code == 200 and raw.headers["content-type"] == "application/x-ndjson"
        lines = [json.loads(line) for line in raw.iter_lines() if line]
    assert [line["done"] for line in lines] == [False] * (len(lines) - 1) + [True]
    assert all(re.fullmatch(RFC3339_NANOS, line["created_at"]) and line["model"] == MODEL for line in lines)
    assert "".join(line["message"]["content"] for line in lines) == f"Let me check.\n\n{ANSWER}"
    assert "basic__echo" in "".join(line["message"].get("thinking", "") for line in lines)
    last = lines[-1]
    assert last["message"] == {"role": "assistant", "content": ""} and last["done_reason"] == "stop"
    assert {"total_duration", "load_duration", "prompt_eval_duration", "eval_duration"} <= last.keys()

    echo_then_answer(upstream)  # and as the library reads the same stream
    parts = list(client(gateway).chat(model=MODEL, messages=ASK, stream=True))
    assert "".join(part.message.content or "" for part in parts).endswith(ANSWER)
    assert parts[-1].done and parts[-1].eval_count == 10


def test_client_tools_are_handed_back_and_their_results_answer_the_right_calls(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    upstream.script(Turn(calls=[Call("get_weather", {"city": "Tokyo"}), Call("get_time", {})]))
    parts = list(client(gateway).chat(model=MODEL, messages=[{"role": "user", "content": "Weather and time?"}],
                                      tools=[WEATHER, TIME], stream=True))
    [handed] = [part.message for part in parts if part.message.tool_calls]
    assert handed.tool_calls is not None
    assert [(call.function.name, dict(call.function.arguments)) for call in handed.tool_calls] == [
        ("get_weather", {"city": "Tokyo"}), ("get_time", {})]
    assert parts[-1].done_reason == "stop"

    upstream.script(Turn(content="Sunny at noon."))
    results = [{"role": "tool", "tool_name": "get_time", "content": "noon"},  # answered out of order, by name
               {"role": "tool", "tool_name": "get_weather", "content": "sunny"}]
    messages = [{"role": "user", "content": "Weather and time?"}, handed, *results]
    response = client(gateway).chat(model=MODEL, messages=messages, tools=[WEATHER, TIME], stream=False)
    assert response.message.content == "Sunny at noon."
    [sent] = upstream.chat_requests()
    assistant, time_result, weather_result = sent["messages"][-3:]
    calls = {call["function"]["name"]: call for call in assistant["tool_calls"]}
    assert json.loads(calls["get_weather"]["function"]["arguments"]) == {"city": "Tokyo"}
    assert time_result == {"role": "tool", "tool_call_id": calls["get_time"]["id"], "content": "noon"}
    assert weather_result["tool_call_id"] == calls["get_weather"]["id"] != calls["get_time"]["id"]


def test_images_reach_the_upstream_as_image_parts(gateway: Gateway, upstream: FakeUpstream) -> None:
    jpeg = b"\xff\xd8\xff\xe0" + bytes(60)
    upstream.script(Turn(content="A picture."))
    client(gateway).chat(model=MODEL, stream=False,
                         messages=[{"role": "user", "content": "What is this?", "images": [jpeg]}])
    [sent] = upstream.chat_requests()
    assert sent["messages"][-1]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + base64.b64encode(jpeg).decode()}}]


def test_models_are_listed_and_shown_as_ollama_clients_read_them(gateway: Gateway) -> None:
    listed = client(gateway).list()
    assert [model.model for model in listed.models] == [MODEL]
    assert listed.models[0].digest and listed.models[0].details is not None
    shown = client(gateway).show(MODEL)
    assert shown.capabilities == ["completion", "tools"]
    assert shown.modelinfo is not None and shown.modelinfo["toolbridge.context_length"] == 8192  # LM Studio's
    with pytest.raises(ollama.ResponseError) as missing:
        client(gateway).show("no-such-model")
    assert missing.value.status_code == 404 and "no-such-model" in missing.value.error
    assert httpx.get(f"{gateway.url}/api/version").json() == {"version": "0.12.0"}
    assert httpx.get(f"{gateway.url}/api/ps").json() == {"models": []}
    pulled = httpx.post(f"{gateway.url}/api/pull", json={"model": MODEL})
    assert pulled.status_code == 404 and "/api/pull is not served" in pulled.json()["error"]
    assert httpx.get(f"{gateway.url}/api/chat").status_code == 405


def test_errors_come_as_ollama_errors_before_and_after_the_answer_began(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    with pytest.raises(ollama.ResponseError) as bad:
        client(gateway).chat(model=MODEL, messages=[{"role": "tool", "content": "orphan"}], stream=False)
    assert bad.value.status_code == 400
    assert "messages[0]" in bad.value.error and "no assistant tool call" in bad.value.error
    upstream.script(Turn(calls=[Call("basic__echo", {"text": "hi"})]), Turn(status=500, error="model crashed"))
    with pytest.raises(ollama.ResponseError) as late:
        list(client(gateway).chat(model=MODEL, messages=ASK, stream=True))
    assert "model crashed" in late.value.error
    with running_gateway(tmp_path, upstream_url=f"{upstream.url}/v1", api_keys="sk-right") as guarded:
        with pytest.raises(ollama.ResponseError) as refused:
            client(guarded, headers={"Authorization": "Bearer sk-wrong"}).list()
        assert refused.value.status_code == 401 and "key" in refused.value.error.lower()
        assert client(guarded, headers={"Authorization": "Bearer sk-right"}).list().models


def test_a_stream_cut_off_at_shutdown_ends_with_an_error_line(tmp_path: Path, upstream: FakeUpstream) -> None:
    with serving(tmp_path, upstream, TOOLBRIDGE_SHUTDOWN_GRACE="0.5") as (gateway, base):
        upstream.script(Turn(calls=[Call("sleep", {"seconds": 60})]), Turn(content="never"))
        body = {"model": MODEL, "messages": [{"role": "user", "content": "sleep"}]}
        seen = lines_across_shutdown(gateway, f"{base}/api/chat", body)
    last = json.loads(seen[-1])
    assert last == {"error": "The gateway is shutting down; this answer was cut off. Send the request again."}
    assert not any(json.loads(line).get("done") for line in seen if line)  # never a made-up ending
