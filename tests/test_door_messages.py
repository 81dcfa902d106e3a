"""Anthropic's Messages API door, driven by the official `anthropic` client over real HTTP: answers from the MCP
tools streamed and whole, the client's own tools round-tripped, what reaches the upstream, the refusals, the
keys and the model list; the raw event stream once."""

import json
import re
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from tests.conftest import Gateway, running_gateway
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn

ASK: list[Any] = [{"role": "user", "content": "Echo hi, please."}]
ANSWER = "The tool said hi."
TRACE = re.compile(r'Calling basic__echo\(\{"text": "hi"\}\)\nbasic__echo ok in \d+ ms: \{"result": "echo: hi"\}\n')
CLOCK = {"name": "clock", "description": "The time in a zone.",
         "input_schema": {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}


def sdk(gateway: Gateway, api_key: str = "sk-client-secret", **options: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gateway.url, api_key=api_key, max_retries=0, **options)


def echo_then_answer(upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="Let me check.", calls=[Call("basic__echo", {"text": "hi"})]), Turn(content=ANSWER))


def blocks(message: anthropic.types.Message) -> list[tuple[str, str]]:
    """Each block's type and text (a thinking block's thinking), the trace's timing left out."""
    shown = [(b.type, b.text if b.type == "text" else b.thinking if b.type == "thinking" else b.id)
             for b in message.content]
    return [(kind, re.sub(r" in \d+ ms", "", text)) for kind, text in shown]


def test_create_and_stream_answer_from_the_mcp_tool(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = sdk(gateway)
    echo_then_answer(upstream)
    whole = client.messages.create(model="m", max_tokens=300, messages=ASK)
    assert whole.id.startswith("msg_") and whole.model == "m" and whole.role == "assistant"
    assert (whole.stop_reason, whole.stop_sequence) == ("end_turn", None)
    assert (whole.usage.input_tokens, whole.usage.output_tokens) == (20, 10)  # both rounds
    # The trace in its own thinking block, between the rounds' texts: blocks never interleave.
    assert [kind for kind, _ in blocks(whole)] == ["text", "thinking", "text"]
    assert whole.content[0].text == "Let me check." and whole.content[2].text == "\n\n" + ANSWER
    assert TRACE.fullmatch(whole.content[1].thinking) and whole.content[1].signature == ""
    sent = upstream.chat_requests()[0]
    assert sent["max_tokens"] == 300 and "basic__echo" in {t["function"]["name"] for t in sent["tools"]}

    echo_then_answer(upstream)
    with client.messages.stream(model="m", max_tokens=300, messages=ASK) as stream:
        said = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert said == "Let me check.\n\n" + ANSWER
    assert blocks(final) == blocks(whole)
    assert (final.stop_reason, final.usage.input_tokens, final.usage.output_tokens) == ("end_turn", 20, 10)


def test_memory_gives_the_next_turn_its_mcp_calls_back(gateway: Gateway, upstream: FakeUpstream) -> None:
    """The client sends the message back as it got it (thinking blocks and all): the gateway recognises its turn
    and the model sees the earlier MCP call and result again."""
    client = sdk(gateway)
    ask = [{"role": "user", "content": "Echo hi for memory, please."}]
    echo_then_answer(upstream)
    with client.messages.stream(model="m", max_tokens=300, messages=ask) as stream:
        first = stream.get_final_message()
    upstream.script(Turn(content="It said hi."))
    client.messages.create(model="m", max_tokens=300, messages=[
        *ask, {"role": "assistant", "content": first.content}, {"role": "user", "content": "What did it say?"}])
    sent = [m for m in upstream.chat_requests()[0]["messages"] if m["role"] != "system"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[1]["tool_calls"][0]["function"]["name"] == "basic__echo"
    assert json.loads(sent[2]["content"])["data"] == {"result": "echo: hi"}


def test_raw_events_come_in_anthropics_order(gateway: Gateway, upstream: FakeUpstream) -> None:
    echo_then_answer(upstream)
    body = {"model": "m", "max_tokens": 300, "messages": ASK, "stream": True}
    with httpx.stream("POST", f"{gateway.url}/v1/messages", json=body, timeout=30,
                      headers={"x-api-key": "anything", "anthropic-version": "2023-06-01"}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        frames = response.read().decode().replace("\r\n", "\n").strip().split("\n\n")
    events = []
    for frame in frames:
        lines = frame.split("\n")
        assert lines[0].startswith("event: ") and lines[1].startswith("data: "), frame
        data = json.loads(lines[1][6:])
        assert data["type"] == lines[0][7:]
        events.append(data)
    names = [event["type"] for event in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert events[0]["message"]["content"] == [] and events[0]["message"]["usage"] == {"input_tokens": 0,
                                                                                       "output_tokens": 0}
    # Each block: start, its deltas, stop, at the next index; then the message's delta.
    opened: list[str] = []
    for event in events[1:-2]:
        if event["type"] == "content_block_start":
            assert event["index"] == len(opened)
            opened.append(event["content_block"]["type"])
        else:
            assert event["index"] == len(opened) - 1
            if event["type"] == "content_block_delta":
                assert event["delta"]["type"] == {"text": "text_delta", "thinking": "thinking_delta"}[opened[-1]]
    assert opened == ["text", "thinking", "text"]
    starts = [i for i, name in enumerate(names) if name == "content_block_start"]
    stops = [i for i, name in enumerate(names) if name == "content_block_stop"]
    assert all(start < stop < following for start, stop, following in zip(starts, stops, [*starts[1:], 10**6],
                                                                          strict=True))
    assert events[-2]["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert events[-2]["usage"] == {"input_tokens": 20, "output_tokens": 10}


def test_a_client_tool_round_trips_as_tool_use_and_tool_result(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = sdk(gateway)
    upstream.script(Turn(content="Asking the clocks.",
                         calls=[Call("clock", {"zone": "UTC"}), Call("clock", {"zone": "Mars"})]))
    ask = [{"role": "user", "content": "What time is it in UTC and on Mars?"}]
    with client.messages.stream(model="m", max_tokens=200, messages=ask, tools=[CLOCK],
                                tool_choice={"type": "any", "disable_parallel_tool_use": False}) as stream:
        first = stream.get_final_message()
    assert first.stop_reason == "tool_use"
    assert [(b.type, getattr(b, "name", None), getattr(b, "input", None)) for b in first.content] == [
        ("text", None, None), ("tool_use", "clock", {"zone": "UTC"}), ("tool_use", "clock", {"zone": "Mars"})]
    sent = upstream.chat_requests()[0]
    assert {"type": "function", "function": {"name": "clock", "description": "The time in a zone.",
                                             "parameters": CLOCK["input_schema"]}} in sent["tools"]
    assert sent["tool_choice"] == "required"

    utc, mars = first.content[1].id, first.content[2].id
    upstream.script(Turn(content="It is noon in UTC; Mars has no clock."))
    results = [{"type": "tool_result", "tool_use_id": utc, "content": "12:00"},
               {"type": "tool_result", "tool_use_id": mars, "content": [{"type": "text", "text": "no such zone"}],
                "is_error": True},
               {"type": "text", "text": "Thanks."}]
    second = client.messages.create(model="m", max_tokens=200, tools=[CLOCK], messages=[
        *ask, {"role": "assistant", "content": first.content}, {"role": "user", "content": results}])
    assert (second.stop_reason, second.content[-1].text) == ("end_turn", "It is noon in UTC; Mars has no clock.")
    history = upstream.chat_requests()[0]["messages"]
    start = next(i for i, m in enumerate(history) if m["role"] == "assistant")
    assert history[start] == {"role": "assistant", "content": "Asking the clocks.", "tool_calls": [
        {"id": utc, "type": "function", "function": {"name": "clock", "arguments": '{"zone": "UTC"}'}},
        {"id": mars, "type": "function", "function": {"name": "clock", "arguments": '{"zone": "Mars"}'}}]}
    assert history[start + 1:start + 4] == [
        {"role": "tool", "tool_call_id": utc, "content": "12:00"},
        {"role": "tool", "tool_call_id": mars, "content": "Error: no such zone"},
        {"role": "user", "content": "Thanks."}]


def test_system_images_and_settings_reach_the_upstream_as_chat(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="A red dot."))
    pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    sdk(gateway).messages.create(
        model="m", max_tokens=50, system=[{"type": "text", "text": "You describe images."}],
        stop_sequences=["END"], thinking={"type": "enabled", "budget_tokens": 10_000}, metadata={"user_id": "u1"},
        messages=[
            {"role": "user", "content": "Hello."},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "sig"},
                                              {"type": "text", "text": "Hi."}]},
            {"role": "user", "content": [
                {"type": "text", "text": "What are these?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": pixel}},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/dot.png"}}]}])
    sent = upstream.chat_requests()[0]
    system, *rest = sent["messages"]
    assert system["role"] == "system" and system["content"].startswith("You describe images.")
    assert rest == [
        {"role": "user", "content": "Hello."},
        {"role": "assistant", "content": "Hi."},
        {"role": "user", "content": [
            {"type": "text", "text": "What are these?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{pixel}"}},
            {"type": "image_url", "image_url": {"url": "https://example.com/dot.png"}}]}]
    assert (sent["stop"], sent["reasoning_effort"], sent["max_tokens"]) == (["END"], "medium", 50)
    assert "metadata" not in sent and "thinking" not in sent and "system" not in sent


def test_what_the_door_cannot_serve_is_a_400_the_sdk_raises(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = sdk(gateway)
    upstream.script()
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(model="m", max_tokens=50, messages=ASK,
                               tools=[CLOCK, {"type": "web_search_20250305", "name": "web_search"}])
    assert refused.value.body["error"]["type"] == "invalid_request_error"
    assert refused.value.body["error"]["message"].startswith("tools.1.type: 'web_search_20250305' is one of")
    with pytest.raises(anthropic.BadRequestError) as missing:  # the SDK's own create() insists on max_tokens
        client.post("/v1/messages", cast_to=anthropic.types.Message, body={"model": "m", "messages": ASK})
    assert missing.value.body == {"type": "error", "error": {"type": "invalid_request_error",
                                                             "message": "max_tokens: Field required"}}
    assert upstream.chat_requests() == []  # nothing half-translated went upstream
    other = httpx.get(f"{gateway.url}/v1/messages")
    assert (other.status_code, other.headers["allow"], other.json()["error"]["type"]) == (
        405, "POST", "invalid_request_error")


def test_a_failure_after_the_stream_began_is_an_error_event(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="Let me check.", calls=[Call("basic__echo", {"text": "hi"})]),
                    Turn(status=500, error="the model crashed"))
    said: list[str] = []
    with (pytest.raises(anthropic.APIStatusError) as failed,
          sdk(gateway).messages.stream(model="m", max_tokens=50, messages=ASK) as stream):
        said.extend(stream.text_stream)
    assert "".join(said) == "Let me check."  # the answer had begun
    assert failed.value.body["type"] == "error"
    assert "the model crashed" in failed.value.body["error"]["message"]


def test_x_api_key_is_the_gateway_key_and_models_list_in_anthropics_shape(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    with running_gateway(tmp_path, upstream_url=f"{upstream.url}/v1", api_keys="k1") as gateway:
        with pytest.raises(anthropic.AuthenticationError) as wrong:
            sdk(gateway, api_key="wrong").messages.create(model="m", max_tokens=50, messages=ASK)
        assert wrong.value.body["error"]["type"] == "authentication_error"
        client = sdk(gateway, api_key="k1")
        upstream.script(Turn(content="welcome"), Turn(content="welcome back"))
        assert client.messages.create(model="m", max_tokens=50, messages=ASK).content[0].text == "welcome"
        # Claude Code's way: the beta client, `?beta=true` and an anthropic-beta header.
        beta = client.beta.messages.create(model="m", max_tokens=50, messages=ASK,
                                           betas=["interleaved-thinking-2025-05-14"])
        assert beta.content[0].text == "welcome back"
        models = client.models.list()
        assert [(m.type, m.id, m.display_name) for m in models.data] == [("model", MODEL, MODEL)]
        assert models.has_more is False and models.first_id == models.last_id == MODEL
        openai_shape = httpx.get(f"{gateway.url}/v1/models", headers={"Authorization": "Bearer k1"}).json()
        assert openai_shape["object"] == "list" and openai_shape["data"][0]["id"] == MODEL
    assert all("x-api-key" not in headers for headers in upstream.headers)


def test_a_running_tool_s_progress_is_in_the_thinking_block(gateway: Gateway, upstream: FakeUpstream) -> None:
    """Issue 49: progress reaches the Messages door as it reaches the chat's reasoning."""
    upstream.script(Turn(calls=[Call("basic__steps", {"count": 2})]), Turn(content=ANSWER))
    with sdk(gateway).messages.stream(model="m", max_tokens=300, messages=ASK) as stream:
        final = stream.get_final_message()
    [thinking] = [text for kind, text in blocks(final) if kind == "thinking"]
    assert "basic__steps: step 1 (1/2)\nbasic__steps: step 2 (2/2)\n" in thinking
