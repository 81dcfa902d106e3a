"""Recorded tool-call streams of each upstream dialect, played by the test upstream through the gateway."""

import json

import pytest

from tests.conftest import Gateway
from tests.support.dialects import DIALECTS, NO_DONE, REASONING, RELAYED_TEXT
from tests.support.fake_upstream import FakeUpstream, Turn, envelopes

ASK = [{"role": "user", "content": "echo hi"}]


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_each_dialect_runs_the_call_and_answers_in_one_message(
    gateway: Gateway, upstream: FakeUpstream, dialect: str
) -> None:
    upstream.script(Turn(raw=DIALECTS[dialect], done=dialect not in NO_DONE), Turn(content="It said hi."))
    client = gateway.client(default_headers={"X-Toolbridge-Trace": "off"})
    chunks = list(client.chat.completions.create(model="m", messages=ASK, stream=True))
    content = "".join(c.choices[0].delta.content or "" for c in chunks)
    reasoning = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in chunks)
    assert [c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason] == ["stop"]
    assert len({c.id for c in chunks}) == 1
    assert content == RELAYED_TEXT.get(dialect, "") + "It said hi."
    assert reasoning == REASONING.get(dialect, "")
    second = upstream.chat_requests()[1]
    [envelope] = envelopes(second)
    assert envelope["data"] == {"result": "echo: hi"}
    assistant = second["messages"][-2]
    call = assistant["tool_calls"][0]
    assert call["id"] and call["function"] == {"name": "basic__echo", "arguments": call["function"]["arguments"]}
    assert json.loads(call["function"]["arguments"]) == {"text": "hi"}
    assert second["messages"][-1]["tool_call_id"] == call["id"]


@pytest.mark.parametrize(
    "printed",
    ['<tool_call>{"name": "basic__echo", "arguments": {"text": "hi"}}</tool_call>',
     '[TOOL_REQUEST]{"name": "basic__echo", "arguments": {"text": "hi"}}[END_TOOL_REQUEST]',
     '{"name": "basic__echo", "arguments": {"text": "hi"}}'],
)
def test_calls_printed_in_a_whole_answer_are_run_too(gateway: Gateway, upstream: FakeUpstream, printed: str) -> None:
    upstream.script(Turn(content=printed), Turn(content="It said hi."))
    message = gateway.client().chat.completions.create(model="m", messages=ASK).choices[0].message
    assert message.content == "It said hi."
    [envelope] = envelopes(upstream.chat_requests()[1])
    assert envelope["data"] == {"result": "echo: hi"}
