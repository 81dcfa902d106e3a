"""The Responses API door, driven by the official `openai` client over real HTTP (whole, streamed, and with the
SDK's stream accumulator), and read raw where the client would hide a mistake: the event sequence, the item ids,
the stored responses and whose they are."""

import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.conftest import Gateway, running_gateway
from tests.support.fake_upstream import Call, FakeUpstream, Turn

ASK = "Echo hi, please."
ANSWER = "The tool said hi."
INSTRUCTIONS = "Answer in one sentence."
LOOKUP = {"type": "function", "name": "lookup", "description": "Looks a word up.",
          "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}}


def script_echo(upstream: FakeUpstream, *more: Turn) -> None:
    upstream.script(Turn(content="Let me check.", calls=[Call("basic__echo", {"text": "hi"})]), Turn(content=ANSWER),
                    *more)


def raw_events(gateway: Gateway, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The stream's events, each checked to be named by its own type."""
    with httpx.stream("POST", f"{gateway.url}/v1/responses", json=body, timeout=30) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line.startswith(("event: ", "data: "))]
    names, payloads = lines[0::2], [json.loads(line[6:]) for line in lines[1::2]]
    assert [name[7:] for name in names] == [event["type"] for event in payloads]
    return payloads


def test_whole_response_answers_from_the_mcp_tool(gateway: Gateway, upstream: FakeUpstream) -> None:
    script_echo(upstream)
    response = gateway.client().responses.create(model="m", input=ASK, instructions=INSTRUCTIONS)
    assert response.id.startswith("resp_") and response.object == "response" and response.status == "completed"
    assert response.output_text == "Let me check.\n\n" + ANSWER
    assert [item.type for item in response.output] == ["message", "reasoning", "mcp_call", "message"]
    reasoning, call = response.output[1], response.output[2]
    assert reasoning.content is not None and "Calling basic__echo" in reasoning.content[0].text
    assert (call.name, json.loads(call.arguments), call.error) == ("basic__echo", {"text": "hi"}, None)
    assert "echo: hi" in (call.output or "")
    assert response.usage is not None and (response.usage.input_tokens, response.usage.total_tokens) == (20, 30)
    assert response.instructions == INSTRUCTIONS and response.tools == [] and response.tool_choice == "auto"
    system, user = upstream.chat_requests()[0]["messages"][:2]
    assert system["role"] == "system" and system["content"].startswith(INSTRUCTIONS)  # the gateway's hint after it
    assert user == {"role": "user", "content": ASK}


def test_the_raw_stream_is_one_consistent_sequence(gateway: Gateway, upstream: FakeUpstream) -> None:
    script_echo(upstream)
    events = raw_events(gateway, {"model": "m", "input": ASK, "stream": True})
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    kinds = [event["type"] for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds.count("response.completed") == 1
    assert kinds[-1] == "response.completed"
    final = events[-1]["response"]
    opened: dict[int, str] = {}
    for event in events[2:-1]:
        if event["type"] == "response.output_item.added":
            assert event["output_index"] == len(opened)  # items open one after another, in output order
            opened[event["output_index"]] = event["item"]["id"]
        elif event["type"] == "response.output_item.done":
            assert event["item"] == final["output"][event["output_index"]]
        if "item_id" in event:
            assert opened[event["output_index"]] == event["item_id"]
    assert list(opened.values()) == [item["id"] for item in final["output"]]
    said = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert said == "Let me check.\n\n" + ANSWER
    mcp_events = [e["type"] for e in events if e["type"].startswith("response.mcp_call")]
    assert mcp_events == ["response.mcp_call_arguments.done", "response.mcp_call.completed"]


def test_a_failure_after_the_stream_began_is_an_error_event_and_response_failed(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    upstream.script(Turn(content="Let me check.", calls=[Call("basic__echo", {"text": "hi"})]),
                    Turn(status=500, error="the model crashed"))
    events = raw_events(gateway, {"model": "m", "input": ASK, "stream": True})
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    error, failed = events[-2:]
    assert error["type"] == "error" and "the model crashed" in error["message"]
    assert failed["type"] == "response.failed" and failed["response"]["status"] == "failed"
    assert failed["response"]["error"] == {"code": error["code"], "message": error["message"]}
    assert not [event for event in events if event["type"] in ("response.completed", "response.incomplete")]


def test_the_sdk_streams_accumulate_the_same_response(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = gateway.client()
    script_echo(upstream)
    with client.responses.stream(model="m", input=ASK) as stream:
        deltas = [event.delta for event in stream if event.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == final.output_text == "Let me check.\n\n" + ANSWER
    assert [item.type for item in final.output] == ["message", "reasoning", "mcp_call", "message"]
    script_echo(upstream)
    events = list(client.responses.create(model="m", input=ASK, stream=True))
    assert events[-1].type == "response.completed" and events[-1].response.output_text.endswith(ANSWER)


def test_a_client_tool_is_handed_back_and_finished(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = gateway.client()
    upstream.script(Turn(calls=[Call("lookup", {"word": "gateway"})]), Turn(content="It means a door."))
    with client.responses.stream(model="m", input="What is a gateway?", tools=[LOOKUP]) as stream:  # type: ignore[list-item]
        first = stream.get_final_response()
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "lookup" and json.loads(calls[0].arguments) == {"word": "gateway"}
    assert calls[0].id is not None and calls[0].id.startswith("fc_") and first.status == "completed"
    second = client.responses.create(
        model="m", previous_response_id=first.id, tools=[LOOKUP],  # type: ignore[list-item]
        input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "a way in"}])
    assert second.output_text == "It means a door." and second.previous_response_id == first.id
    sent = upstream.chat_requests()[1]["messages"][1:]  # after the gateway's system hint
    assert sent[0] == {"role": "user", "content": "What is a gateway?"}
    assert [call["id"] for call in sent[1]["tool_calls"]] == [calls[0].call_id]
    assert sent[2] == {"role": "tool", "tool_call_id": calls[0].call_id, "content": "a way in"}
    assert upstream.chat_requests()[0]["tools"][0]["function"]["name"] == "lookup"


def test_previous_response_id_continues_with_the_earlier_tool_results(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = gateway.client()
    script_echo(upstream, Turn(content="Still hi."))
    first = client.responses.create(model="m", input=ASK, instructions=INSTRUCTIONS)
    second = client.responses.create(model="m", input="And again?", previous_response_id=first.id,
                                     instructions=INSTRUCTIONS)
    assert second.output_text == "Still hi."
    sent = upstream.chat_requests()[2]["messages"]
    assert sent[0]["content"].startswith(INSTRUCTIONS) and sent[-1] == {"role": "user", "content": "And again?"}
    assert any(m["role"] == "tool" and "echo: hi" in m["content"] for m in sent), sent  # memory gave it back
    assert client.responses.retrieve(second.id).output_text == "Still hi."
    # The same turn with the earlier output sent back as input items (what the Agents SDK does), nothing stored.
    upstream.script(Turn(content="Still hi."))
    sent_back = [{"role": "user", "content": ASK}, *[item.model_dump(exclude_none=True) for item in first.output],
                 {"role": "user", "content": "And again?"}]
    third = client.responses.create(model="m", input=sent_back, instructions=INSTRUCTIONS, store=False)
    assert third.output_text == "Still hi." and upstream.chat_requests()[0]["messages"] == sent


def test_what_the_gateway_cannot_serve_is_a_400_naming_it(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = gateway.client()
    upstream.script()
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="m", input=ASK, tools=[{"type": "web_search"}])
    assert refused.value.body["param"] == "tools[0].type"  # type: ignore[index]
    assert "cannot be served" in refused.value.body["message"]  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as background:
        client.responses.create(model="m", input=ASK, background=True)
    assert background.value.body["param"] == "background"  # type: ignore[index]
    answer = httpx.post(f"{gateway.url}/v1/responses/resp_1/cancel", json={}, timeout=10)
    assert answer.status_code == 404 and "is not served" in answer.json()["error"]["message"]
    assert upstream.requests == []  # nothing half-translated went upstream, nothing passed through


def test_another_key_cannot_use_your_responses(tmp_path: Path, upstream: FakeUpstream) -> None:
    with running_gateway(tmp_path, upstream_url=f"{upstream.url}/v1", api_keys="sk-alice,sk-bob") as gateway:
        alice, bob = gateway.client(api_key="sk-alice"), gateway.client(api_key="sk-bob")
        upstream.script(Turn(content="Alice's answer."), Turn(content="not for bob"))
        first = alice.responses.create(model="m", input="hello")
        with pytest.raises(openai.BadRequestError) as refused:
            bob.responses.create(model="m", input="go on", previous_response_id=first.id)
        assert refused.value.code == "previous_response_not_found"
        with pytest.raises(openai.NotFoundError):
            bob.responses.retrieve(first.id)
        with pytest.raises(openai.NotFoundError):
            bob.responses.delete(first.id)
        assert alice.responses.retrieve(first.id).output_text == "Alice's answer."
        unstored = alice.responses.create(model="m", input="forget this", store=False)
        with pytest.raises(openai.NotFoundError):
            alice.responses.retrieve(unstored.id)
        alice.responses.delete(first.id)
        with pytest.raises(openai.NotFoundError):
            alice.responses.retrieve(first.id)
        assert len(upstream.chat_requests()) == 2


def test_a_namespaced_client_tool_is_handed_back_with_its_namespace_as_codex_sends_them(
    gateway: Gateway, upstream: FakeUpstream,
) -> None:
    """Codex CLI offers its sub-agent tools in a `namespace` tool, sends `store: false` and the whole
    conversation back, the call with its `namespace`."""
    agents = {"type": "namespace", "name": "agents", "description": "Sub-agents.",
              "tools": [{**LOOKUP, "name": "spawn"}]}
    client = gateway.client()
    upstream.script(Turn(calls=[Call("agents__spawn", {"word": "w"})]), Turn(content="Spawned."))
    with client.responses.stream(model="m", input="Spawn one.", tools=[agents], store=False) as stream:  # type: ignore[list-item]
        first = stream.get_final_response()
    call = next(item for item in first.output if item.type == "function_call")
    assert (call.namespace, call.name) == ("agents", "spawn")
    assert upstream.chat_requests()[0]["tools"][0]["function"]["name"] == "agents__spawn"
    second = client.responses.create(model="m", store=False, tools=[agents], input=[  # type: ignore[list-item]
        {"role": "user", "content": "Spawn one."}, call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": "started"}])
    assert second.output_text == "Spawned."
    assert upstream.chat_requests()[1]["messages"][-2]["tool_calls"][0]["function"]["name"] == "agents__spawn"


def test_a_reasoning_summary_asked_for_carries_the_trace_in_the_events_codex_shows(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    """Codex asks for `reasoning: {summary: "auto"}` and shows only summaries by default: the trace goes as the
    reasoning item's `summary_text`, streamed with the summary's events in the documented order (the SDK's
    helper checks the sequence), and the whole response says the same."""
    client = gateway.client()
    script_echo(upstream)
    with client.responses.stream(model="m", input=ASK, reasoning={"summary": "auto"}) as stream:
        events = list(stream)
        final = stream.get_final_response()
    reasoning = next(item for item in final.output if item.type == "reasoning")
    [summary] = reasoning.summary
    assert "Calling basic__echo" in summary.text and "echo: hi" in summary.text and not reasoning.content
    own = [event.type for event in events if getattr(event, "item_id", None) == reasoning.id]
    assert own == ["response.reasoning_summary_part.added",
                   *["response.reasoning_summary_text.delta"] * (len(own) - 3),
                   "response.reasoning_summary_text.done", "response.reasoning_summary_part.done"]
    deltas = [event for event in events if event.type == "response.reasoning_summary_text.delta"]
    assert len(deltas) >= 2 and all(event.summary_index == 0 for event in deltas)
    assert "".join(event.delta for event in deltas) == summary.text
    assert not [event for event in events if event.type.startswith("response.reasoning_text")]
    script_echo(upstream)
    whole = client.responses.create(model="m", input=ASK, reasoning={"summary": "concise"})
    assert [item.type for item in whole.output] == ["message", "reasoning", "mcp_call", "message"]
    assert "Calling basic__echo" in whole.output[1].summary[0].text  # type: ignore[union-attr]


def test_codexs_instructions_and_developer_messages_reach_the_model_as_one_system_message(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    """Codex sends `instructions` and two `developer` messages (its sandbox, its skills) before the user's: a Gemma
    or Mistral template refuses `developer`, so the model gets them joined in that order, as one system message."""
    upstream.script(Turn(content="Hi."))
    gateway.client().responses.create(model="m", instructions="You are Codex.", store=False, input=[
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Sandbox: read-only."}]},
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Skills: none."}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Say hi."}]}])
    system, *rest = upstream.chat_requests()[0]["messages"]
    assert system["role"] == "system" and rest == [{"role": "user", "content": "Say hi."}]
    assert system["content"].startswith("You are Codex.\n\nSandbox: read-only.\n\nSkills: none.\n\n")


def test_a_running_tool_s_progress_is_in_the_reasoning_item(gateway: Gateway, upstream: FakeUpstream) -> None:
    """Issue 49: progress reaches the Responses door as it reaches the chat's reasoning, streamed as it comes."""
    upstream.script(Turn(calls=[Call("basic__steps", {"count": 2})]), Turn(content="Done."))
    with gateway.client().responses.stream(model="m", input="Take two steps.") as stream:
        deltas = [event.delta for event in stream if event.type == "response.reasoning_text.delta"]
        final = stream.get_final_response()
    reasoning = next(item for item in final.output if item.type == "reasoning")
    assert reasoning.content is not None
    assert "basic__steps: step 1 (1/2)\nbasic__steps: step 2 (2/2)\n" in reasoning.content[0].text
    assert any("step 1 (1/2)" in delta for delta in deltas)
