"""Chat completions through the gateway, driven by the official openai SDK as clients drive it."""

import json
import threading
import uuid

import httpx
import openai
import pytest

from tests.conftest import Gateway
from tests.support.fake_upstream import Call, FakeUpstream, Turn, envelopes, last_tool_results, readable

ASK = [{"role": "user", "content": "What is 2 + 3?"}]


def answer_with_tool_results(body: dict) -> Turn:
    return Turn(content="Results: " + " | ".join(readable(c) for c in last_tool_results(body).values()))


def test_plain_chat_passes_answer_and_unknown_fields_through(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="Hello there, friend."))
    reply = gateway.client().chat.completions.create(
        model="qwen3-8b", messages=ASK, extra_body={"top_k": 20, "my_field": {"nested": [1, 2]}}
    )
    assert reply.choices[0].message.content == "Hello there, friend."
    assert reply.choices[0].finish_reason == "stop"
    sent = upstream.chat_requests()[0]
    assert sent["top_k"] == 20
    assert sent["my_field"] == {"nested": [1, 2]}
    assert sent["messages"][1:] == ASK
    assert sent["messages"][0]["role"] == "system"


def test_the_system_hint_goes_into_the_clients_system_message_once(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="ok"), Turn(content="ok"))
    system = {"role": "system", "content": "You are terse."}
    gateway.client().chat.completions.create(model="m", messages=[system, *ASK])
    first = upstream.chat_requests()[0]["messages"]
    assert first[0]["content"].startswith("You are terse.\n\nTool results are JSON objects.")
    assert first[1:] == ASK
    gateway.client().chat.completions.create(model="m", messages=[first[0], *ASK])
    assert upstream.chat_requests()[1]["messages"][0] == first[0]


def test_developer_and_later_system_messages_reach_the_model_as_one_system_message_first(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    """Issue 45: the openai SDK's o-series habit (`developer`) and a system message later on reached the model as
    they came, and the chat templates of Gemma and Mistral refuse both (a 500 from LM Studio or llama.cpp)."""
    upstream.script(Turn(calls=[Call("basic__echo", {"text": "hi"})]), Turn(content="It said hi."),
                    Turn(content="Il a dit hi."))
    messages: list = [{"role": "developer", "content": "You are terse."}, *ASK]
    first = gateway.client().chat.completions.create(model="m", messages=messages).choices[0].message.content
    messages += [{"role": "assistant", "content": first},
                 {"role": "system", "content": [{"type": "text", "text": "Now "}, {"type": "text", "text": "French."}]},
                 {"role": "user", "content": "Again?"}]
    gateway.client().chat.completions.create(model="m", messages=messages)
    for sent in [upstream.chat_requests()[0]["messages"], upstream.chat_requests()[2]["messages"]]:
        assert [m["role"] for m in sent].count("system") == 1 and sent[0]["role"] == "system"
        assert "developer" not in [m["role"] for m in sent]
    one, two = upstream.chat_requests()[0]["messages"][0], upstream.chat_requests()[2]["messages"][0]
    assert one["content"].startswith("You are terse.\n\nTool results are JSON objects.")
    assert two["content"].startswith("You are terse.\n\nNow French.\n\nTool results are JSON objects.")
    # Memory knew the turn by the client's own messages: its call and result came back.
    assert [m["role"] for m in upstream.chat_requests()[2]["messages"]] == [
        "system", "user", "assistant", "tool", "assistant", "user"]


def test_mcp_tools_are_injected_with_prefixed_safe_names(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="ok"))
    gateway.client().chat.completions.create(model="m", messages=ASK)
    names = {tool["function"]["name"] for tool in upstream.chat_requests()[0]["tools"]}
    # basic lists its tools two per page: all six arrive only if pagination is followed.
    assert {"basic__echo", "basic__add", "basic__fail", "basic__get_weather", "basic__rendezvous",
            "basic__sleep"} <= names
    assert "remote__echo" in names


def test_one_tool_round_non_streaming(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(calls=[Call("basic__add", {"a": 2, "b": 3})]), answer_with_tool_results)
    reply = gateway.client().chat.completions.create(model="m", messages=ASK)
    assert reply.choices[0].message.content == "Results: 5"
    assert reply.choices[0].message.tool_calls is None
    second = upstream.chat_requests()[1]
    assistant, tool = second["messages"][-2:]
    assert assistant["tool_calls"][0]["id"] == "400000000"
    assert assistant["tool_calls"][0]["function"] == {"name": "basic__add", "arguments": '{"a": 2, "b": 3}'}
    assert tool["role"] == "tool"
    assert tool["tool_call_id"] == "400000000"
    envelope = json.loads(tool["content"])
    assert envelope["status"] == "success"
    assert envelope == {"status": "success", "data": {"result": "5"}}


def test_the_tool_call_turn_sent_back_has_string_content(gateway: Gateway, upstream: FakeUpstream) -> None:
    """llama-cpp-python's server refuses an assistant message whose content is null (its schema wants a
    string); OpenAI, LM Studio and llama.cpp take "" as well."""
    upstream.script(Turn(calls=[Call("basic__echo", {"text": "x"})]), Turn(content="done"))
    gateway.client().chat.completions.create(model="m", messages=ASK)
    calling = next(m for m in upstream.chat_requests()[1]["messages"] if m.get("tool_calls"))
    assert calling["content"] == ""


def test_one_tool_round_streaming_is_one_clean_message(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(calls=[Call("basic__echo", {"text": "hi"})]), answer_with_tool_results)
    chunks = list(gateway.client().chat.completions.create(model="m", messages=ASK, stream=True))
    assert len({c.id for c in chunks}) == 1
    assert len({c.created for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].delta.role for c in chunks[1:]] == [None] * (len(chunks) - 1)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    assert all(not c.choices[0].delta.tool_calls for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Results: echo: hi"


def test_raw_stream_ends_with_done_and_has_no_upstream_tool_chunks(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(calls=[Call("basic__echo", {"text": "raw"})]), answer_with_tool_results)
    body = {"model": "m", "messages": ASK, "stream": True}
    with httpx.stream("POST", f"{gateway.url}/v1/chat/completions", json=body, timeout=30) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    payloads = [json.loads(line[6:]) for line in lines[:-1]]
    assert all("tool_calls" not in p["choices"][0]["delta"] for p in payloads)
    assert sum(1 for p in payloads if p["choices"][0]["finish_reason"]) == 1
    assert payloads[-1]["choices"][0]["finish_reason"] == "stop"


def test_several_rounds_feed_each_result_back(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(
        Turn(calls=[Call("basic__echo", {"text": "one"})]),
        Turn(calls=[Call("remote__add", {"a": 40, "b": 2})]),
        answer_with_tool_results,
    )
    stream = gateway.client().chat.completions.create(model="m", messages=ASK, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "Results: 42"
    third = upstream.chat_requests()[2]
    tool_contents = [readable(m["content"]) for m in third["messages"] if m["role"] == "tool"]
    assert tool_contents == ["echo: one", "42"]


def test_legacy_sse_server_is_reached_by_falling_back(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(calls=[Call("legacy__echo", {"text": "old transport"})]), answer_with_tool_results)
    reply = gateway.client().chat.completions.create(model="m", messages=ASK)
    assert reply.choices[0].message.content == "Results: echo: old transport"


def test_parallel_calls_run_concurrently(gateway: Gateway, upstream: FakeUpstream) -> None:
    # Each rendezvous call only succeeds if the other is in flight at the same time.
    key = uuid.uuid4().hex
    calls = [Call("basic__rendezvous", {"key": key, "parties": 2, "wait_seconds": 10}) for _ in range(2)]
    upstream.script(Turn(calls=calls), answer_with_tool_results)
    reply = gateway.client().chat.completions.create(model="m", messages=ASK)
    results = last_tool_results(upstream.chat_requests()[1])
    assert list(results) == ["400000000", "400000001"]
    assert [readable(r) for r in results.values()] == [f"met 2 at {key}"] * 2
    assert reply.choices[0].message.content == f"Results: met 2 at {key} | met 2 at {key}"


def test_round_limit_asks_for_an_answer_with_tools_kept(gateway: Gateway, upstream: FakeUpstream) -> None:
    assert gateway.settings.tools.max_tool_rounds == 3
    loop = [Turn(calls=[Call("basic__echo", {"text": str(i)})]) for i in range(3)]
    upstream.script(*loop, Turn(content="I'll stop here."))
    reply = gateway.client().chat.completions.create(model="m", messages=ASK)
    assert reply.choices[0].message.content == "I'll stop here."
    sent = upstream.chat_requests()
    assert len(sent) == 4
    assert [r.get("tool_choice") for r in sent] == [None, None, None, "none"]
    assert all(r["tools"] for r in sent)


def test_a_repeated_call_is_not_run_again_and_the_model_is_asked_to_answer(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    # Small models repeat a call they have the result of until the round limit; the same name and
    # arguments (in any key order) are not run again, and the next request forbids calling.
    upstream.script(
        Turn(calls=[Call("remote__add", {"a": 40, "b": 2})]),
        Turn(calls=[Call("remote__add", '{"b": 2,  "a": 40}')]),
        answer_with_tool_results,
    )
    reply = gateway.client().chat.completions.create(model="m", messages=ASK)
    assert reply.choices[0].message.content == "Results: 42"
    sent = upstream.chat_requests()
    assert [r.get("tool_choice") for r in sent] == [None, None, "none"]
    assert sent[2]["messages"] == sent[1]["messages"]  # the repeat left no trace in what the model reads


def test_a_call_with_other_arguments_still_runs(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(
        Turn(calls=[Call("remote__add", {"a": 40, "b": 2})]),
        Turn(calls=[Call("remote__add", {"a": 40, "b": 3})]),
        answer_with_tool_results,
    )
    gateway.client().chat.completions.create(model="m", messages=ASK)
    sent = upstream.chat_requests()
    assert [r.get("tool_choice") for r in sent] == [None, None, None]
    assert [readable(m["content"]) for m in sent[2]["messages"] if m["role"] == "tool"] == ["42", "43"]


def test_tool_error_becomes_a_result_the_model_reads(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(calls=[Call("basic__fail", {"message": "disk full"})]), answer_with_tool_results)
    reply = gateway.client().chat.completions.create(model="m", messages=ASK)
    [envelope] = envelopes(upstream.chat_requests()[1])
    assert envelope["status"] == "error"
    assert envelope["data"]["error"] == "tool_error"
    assert "disk full" in envelope["data"]["message"]
    assert reply.choices[0].message.content.startswith("Results: Error[tool_error]:")


@pytest.mark.parametrize(
    ("call", "kind", "expected"),
    [
        (Call("basic__add", "{not json"), "invalid_arguments", "not valid JSON"),
        (Call("basic__add", "[1, 2]"), "invalid_arguments", "one JSON object"),
        (Call("basic__add", '{"a": ' + "9" * 5000 + ', "b": 1}'), "invalid_arguments", "a number too long to read"),
        (Call("basic__ad", {"a": 1, "b": 2}), "unknown_tool", "Did you mean: basic__add"),
    ],
)
def test_unusable_calls_are_answered_with_errors_not_500(
    gateway: Gateway, upstream: FakeUpstream, call: Call, kind: str, expected: str
) -> None:
    upstream.script(Turn(calls=[call]), answer_with_tool_results)
    gateway.client().chat.completions.create(model="m", messages=ASK, tools=[])
    [envelope] = envelopes(upstream.chat_requests()[1])
    assert envelope["status"] == "error"
    assert envelope["data"]["error"] == kind
    assert expected in envelope["data"]["message"]


def test_dotted_mcp_name_maps_back_to_the_original_tool(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(calls=[Call("basic__get_weather", {"city": "Oslo"})]), answer_with_tool_results)
    reply = gateway.client().chat.completions.create(model="m", messages=ASK)
    assert reply.choices[0].message.content == "Results: sunny in Oslo"


def test_client_tools_are_merged_and_their_calls_handed_back(gateway: Gateway, upstream: FakeUpstream) -> None:
    client_tool = {"type": "function", "function": {"name": "get_location", "parameters": {"type": "object"}}}
    upstream.script(Turn(content="Let me look.", calls=[Call("get_location", {"precise": True})]))
    reply = gateway.client().chat.completions.create(model="m", messages=ASK, tools=[client_tool])
    sent_names = [t["function"]["name"] for t in upstream.chat_requests()[0]["tools"]]
    assert sent_names[0] == "get_location"
    assert "basic__echo" in sent_names
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls[0].id == "400000000"
    assert choice.message.tool_calls[0].function.name == "get_location"
    assert json.loads(choice.message.tool_calls[0].function.arguments) == {"precise": True}

    # The client runs its tool and comes back; the conversation goes on.
    upstream.script(lambda body: Turn(content=f"You are at {body['messages'][-1]['content']}."))
    follow_up = [
        *ASK,
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "400000000", "content": "Lisbon"},
    ]
    again = gateway.client().chat.completions.create(model="m", messages=follow_up, tools=[client_tool])
    assert again.choices[0].message.content == "You are at Lisbon."


def test_client_tool_call_streams_as_tool_call_deltas(gateway: Gateway, upstream: FakeUpstream) -> None:
    client_tool = {"type": "function", "function": {"name": "get_location", "parameters": {"type": "object"}}}
    upstream.script(Turn(calls=[Call("get_location", {"precise": False})]))
    chunks = list(gateway.client().chat.completions.create(model="m", messages=ASK, tools=[client_tool], stream=True))
    deltas = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert [(d.index, d.id, d.function.name) for d in deltas] == [(0, "400000000", "get_location")]
    assert json.loads(deltas[0].function.arguments) == {"precise": False}
    assert [c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason] == ["tool_calls"]


def test_non_streaming_requests_get_whole_upstream_answers_and_summed_usage(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    upstream.script(Turn(calls=[Call("basic__echo", {"text": "x"})], usage=(100, 7)), Turn(content="done"))
    reply = gateway.client().chat.completions.create(model="m", messages=ASK)
    assert [r.get("stream") for r in upstream.chat_requests()] == [None, None]
    assert reply.usage.model_dump(exclude_none=True) == {
        "prompt_tokens": 110, "completion_tokens": 12, "total_tokens": 122
    }


def test_usage_is_summed_over_rounds(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(
        Turn(calls=[Call("basic__echo", {"text": "x"})], usage=(100, 7)), Turn(content="done", usage=(130, 11))
    )
    chunks = list(
        gateway.client().chat.completions.create(
            model="m", messages=ASK, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[-1].choices == []
    assert chunks[-1].usage.model_dump(exclude_none=True) == {
        "prompt_tokens": 230, "completion_tokens": 18, "total_tokens": 248
    }
    upstream.script(Turn(content="plain"))
    no_usage = list(gateway.client().chat.completions.create(model="m", messages=ASK, stream=True))
    assert all(c.usage is None for c in no_usage)


def test_final_content_is_relayed_as_it_arrives(gateway: Gateway, upstream: FakeUpstream) -> None:
    # The upstream holds its stream after the first piece until we have seen that piece.
    release = threading.Event()
    upstream.script(Turn(content="First piece, then the rest.", hold_after_first_content=release))
    stream = gateway.client(timeout=15).chat.completions.create(model="m", messages=ASK, stream=True)
    try:
        seen = ""
        for chunk in stream:
            seen += chunk.choices[0].delta.content or ""
            if seen:
                break
        assert seen == "First"
    finally:
        release.set()
    rest = "".join(c.choices[0].delta.content or "" for c in stream)
    assert seen + rest == "First piece, then the rest."


def test_reasoning_is_forwarded_as_reasoning_content(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(reasoning="thinking hard", content="42"))
    reply = gateway.client().chat.completions.create(model="m", messages=ASK)
    assert reply.choices[0].message.content == "42"
    assert reply.choices[0].message.model_extra["reasoning_content"] == "thinking hard"
    upstream.script(Turn(reasoning="thinking hard", content="42"))
    chunks = list(gateway.client().chat.completions.create(model="m", messages=ASK, stream=True))
    reasoning = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content", "") for c in chunks)
    assert reasoning == "thinking hard"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "42"


def test_upstream_4xx_is_passed_through(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(status=400, error="Model 'nope' is not loaded"))
    with pytest.raises(openai.BadRequestError) as caught:
        gateway.client().chat.completions.create(model="nope", messages=ASK)
    assert caught.value.status_code == 400
    assert caught.value.body["message"] == "Model 'nope' is not loaded"
    assert caught.value.type == "invalid_request_error"


def test_error_after_stream_began_is_one_error_event(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(calls=[Call("basic__echo", {"text": "x"})]), Turn(status=400, error="context overflow"))
    stream = gateway.client().chat.completions.create(model="m", messages=ASK, stream=True)
    with pytest.raises(openai.APIError) as caught:
        list(stream)
    assert "context overflow" in caught.value.message
    body = {"model": "m", "messages": ASK, "stream": True}
    upstream.script(Turn(calls=[Call("basic__echo", {"text": "x"})]), Turn(status=400, error="context overflow"))
    with httpx.stream("POST", f"{gateway.url}/v1/chat/completions", json=body, timeout=30) as response:
        assert response.status_code == 200
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert json.loads(lines[-2][6:])["error"]["message"] == "context overflow"
    assert lines[-1] == "data: [DONE]"


def test_client_key_is_not_forwarded_and_upstream_key_is(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="ok"))
    gateway.client().chat.completions.create(model="m", messages=ASK)
    gateway.client().models.list()
    for headers in upstream.headers:
        assert headers["authorization"] == "Bearer sk-upstream"
