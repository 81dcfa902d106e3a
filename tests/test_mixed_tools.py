"""One turn that calls a client tool and an MCP tool: the MCP call runs, the client gets its own, and on
the client's next request the model sees the whole turn with both results."""

import json

from tests.conftest import Gateway
from tests.support.fake_upstream import Call, FakeUpstream, Turn

CLIENT_TOOL = {"type": "function", "function": {"name": "get_location", "parameters": {"type": "object"}}}
ASK = [{"role": "user", "content": "Where am I, and echo hi."}]


def test_a_mixed_turn_loses_nothing_over_two_requests(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="Checking.", calls=[Call("get_location", {}), Call("basic__echo", {"text": "hi"})]))
    client = gateway.client(default_headers={"X-Toolbridge-Trace": "off"})
    first = client.chat.completions.create(model="m", messages=ASK, tools=[CLIENT_TOOL])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert [(c.id, c.function.name) for c in choice.message.tool_calls] == [("400000000", "get_location")]
    assert len(upstream.chat_requests()) == 1  # the MCP call ran without asking the model again

    upstream.script(Turn(content="You are in Lisbon, and the echo said hi."))
    follow_up = [*ASK, choice.message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": "400000000", "content": "Lisbon"}]
    answer = client.chat.completions.create(model="m", messages=follow_up, tools=[CLIENT_TOOL])
    assert answer.choices[0].message.content == "You are in Lisbon, and the echo said hi."

    seen = upstream.chat_requests()[0]["messages"]
    assistant = next(m for m in seen if m["role"] == "assistant")
    assert [c["function"]["name"] for c in assistant["tool_calls"]] == ["get_location", "basic__echo"]
    results = {m["tool_call_id"]: m["content"] for m in seen if m["role"] == "tool"}
    assert results["400000000"] == "Lisbon"
    assert json.loads(results["400000001"])["data"] == {"result": "echo: hi"}


def test_streamed_mixed_turns_hand_back_only_client_calls(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(calls=[Call("basic__echo", {"text": "a"}), Call("get_location", {})]))
    chunks = list(gateway.client().chat.completions.create(model="m", messages=ASK, tools=[CLIENT_TOOL], stream=True))
    deltas = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert [(d.index, d.function.name) for d in deltas] == [(0, "get_location")]
    reasoning = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in chunks)
    assert "Calling basic__echo" in reasoning
