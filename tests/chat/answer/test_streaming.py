"""One coherent message in every trace mode, streamed and not, as the SDK and a raw SSE reader see it."""

import json
import re

import httpx
import pytest

from tests.conftest import Gateway
from tests.support.fake_upstream import Call, FakeUpstream, Turn

ASK = [{"role": "user", "content": "Echo hi, please."}]
ANSWER = "The tool said hi."


def script(upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="Let me check.", calls=[Call("basic__echo", {"text": "hi"})]),
                    Turn(content=ANSWER))


def raw_stream(gateway: Gateway, trace: str) -> list[dict]:
    body = {"model": "m", "messages": ASK, "stream": True, "stream_options": {"include_usage": True}}
    with httpx.stream("POST", f"{gateway.url}/v1/chat/completions", json=body,
                      headers={"X-Toolbridge-Trace": trace}, timeout=30) as response:
        assert response.status_code == 200
        lines = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


def joined(chunks: list[dict], field: str) -> str:
    return "".join(c["choices"][0]["delta"].get(field) or "" for c in chunks if c["choices"])


@pytest.mark.parametrize("trace", ["reasoning", "details", "markdown", "off"])
def test_every_trace_mode_streams_one_message(gateway: Gateway, upstream: FakeUpstream, trace: str) -> None:
    script(upstream)
    chunks = raw_stream(gateway, trace)
    assert len({(c["id"], c["created"], c["model"]) for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all("role" not in c["choices"][0]["delta"] for c in chunks[1:] if c["choices"])
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]] \
        == ["stop"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == 30
    assert all("tool_calls" not in c["choices"][0]["delta"] for c in chunks if c["choices"])
    content, reasoning = joined(chunks, "content"), joined(chunks, "reasoning_content")
    assert content.startswith("Let me check.") and content.endswith(ANSWER)
    if trace == "reasoning":
        assert content == "Let me check.\n\n" + ANSWER  # the rounds' texts apart, as two paragraphs
        assert re.fullmatch(r'Calling basic__echo\(\{"text": "hi"\}\)\n'
                            r'basic__echo ok in \d+ ms: \{"result": "echo: hi"\}\n', reasoning), reasoning
    elif trace == "details":
        assert reasoning == ""
        assert '\n<details type="tool_calls" done="true" ' in content
        assert 'name="basic__echo"' in content and "</details>\n" + ANSWER in content
    elif trace == "markdown":
        assert reasoning == ""
        assert "\n> 🔧 `basic__echo` " in content
    else:
        assert (content, reasoning) == ("Let me check.\n\n" + ANSWER, "")


@pytest.mark.parametrize("trace", ["reasoning", "details", "markdown", "off"])
def test_streamed_and_whole_answers_are_the_same_message(gateway: Gateway, upstream: FakeUpstream, trace: str) -> None:
    client = gateway.client(default_headers={"X-Toolbridge-Trace": trace})
    script(upstream)
    whole = client.chat.completions.create(model="m", messages=ASK).choices[0].message
    script(upstream)
    streamed = {"content": "", "reasoning": ""}
    for chunk in client.chat.completions.create(model="m", messages=ASK, stream=True):
        delta = chunk.choices[0].delta
        streamed["content"] += delta.content or ""
        streamed["reasoning"] += (delta.model_extra or {}).get("reasoning_content") or ""
    durations = r" \d+ ms| in \d+ ms|duration=\"\d+\"| \(\d+ ms\)|id=\"[^\"]+\""

    def normal(text: str) -> str:
        return re.sub(durations, "", text)

    assert normal(streamed["content"]) == normal(whole.content or "")
    assert normal(streamed["reasoning"]) == normal((whole.model_extra or {}).get("reasoning_content") or "")


def test_the_trace_header_must_name_a_mode(gateway: Gateway) -> None:
    response = httpx.post(f"{gateway.url}/v1/chat/completions", json={"model": "m", "messages": ASK},
                          headers={"X-Toolbridge-Trace": "loud"})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "X-Toolbridge-Trace"


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_a_details_trace_in_history_comes_back_as_the_calls_and_results_it_recorded(
    gateway: Gateway, upstream: FakeUpstream, streamed: bool
) -> None:
    # Open WebUI keeps the details blocks in the assistant content it sends back: they are read back into the
    # assistant's tool_calls and the tool message the model saw, then the turn's final text.
    script(upstream)
    client = gateway.client(default_headers={"X-Toolbridge-Trace": "details"})
    if streamed:
        stream = client.chat.completions.create(model="m", messages=ASK, stream=True)
        content = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    else:
        content = client.chat.completions.create(model="m", messages=ASK).choices[0].message.content or ""
    assert "<details" in content
    _, second_round = upstream.chat_requests()
    call_turn, result = second_round["messages"][-2:]  # what the model saw of the first turn's call
    assert (call_turn["role"], result["role"]) == ("assistant", "tool")

    upstream.script(Turn(content="It said hi."))
    history = [*ASK, {"role": "assistant", "content": content}, {"role": "user", "content": "What did it return?"}]
    gateway.client().chat.completions.create(model="m", messages=history)
    sent = upstream.chat_requests()[0]["messages"]
    assert sent[-4:] == [
        {"role": "assistant", "content": "Let me check.", "tool_calls": call_turn["tool_calls"]},
        result,  # the same id, and the same envelope, byte for byte
        {"role": "assistant", "content": ANSWER},
        {"role": "user", "content": "What did it return?"},
    ]


def test_a_markdown_trace_in_history_is_removed(gateway: Gateway, upstream: FakeUpstream) -> None:
    script(upstream)
    first = gateway.client(default_headers={"X-Toolbridge-Trace": "markdown"}).chat.completions.create(
        model="m", messages=ASK
    )
    content = first.choices[0].message.content or ""
    assert "basic__echo" in content
    upstream.script(Turn(content="again"))
    history = [*ASK, {"role": "assistant", "content": content}, {"role": "user", "content": "And now?"}]
    gateway.client().chat.completions.create(model="m", messages=history)
    sent = upstream.chat_requests()[0]["messages"]
    assert sent[-2]["role"] == "assistant" and "tool_calls" not in sent[-2]
    assert "basic__echo" not in sent[-2]["content"] and ANSWER in sent[-2]["content"]


def test_progress_of_a_running_tool_appears_in_the_trace(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(calls=[Call("basic__steps", {"count": 2})]), Turn(content=ANSWER))
    chunks = raw_stream(gateway, "reasoning")
    reasoning = joined(chunks, "reasoning_content")
    assert "basic__steps: step 1 (1/2)\nbasic__steps: step 2 (2/2)\n" in reasoning
    assert reasoning.index("Calling basic__steps") < reasoning.index("step 1") < reasoning.index("basic__steps ok")


def test_long_tool_calls_keep_the_stream_alive_with_comment_pings(
    gateway: Gateway, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.api import doors

    monkeypatch.setattr(doors, "SSE_PING_SECONDS", 0.2)
    upstream.script(Turn(calls=[Call("basic__sleep", {"seconds": 1})]), Turn(content=ANSWER))
    body = {"model": "m", "messages": ASK, "stream": True}
    with httpx.stream("POST", f"{gateway.url}/v1/chat/completions", json=body, timeout=30) as response:
        lines = list(response.iter_lines())
    pings = [line for line in lines if line.startswith(":")]
    assert pings, lines
    assert lines.index(pings[0]) < next(i for i, line in enumerate(lines) if ANSWER[:5] in line)


@pytest.mark.parametrize("trace", ["reasoning", "off"])
def test_the_sdks_stream_accumulator_rebuilds_the_non_streamed_message(
    gateway: Gateway, upstream: FakeUpstream, trace: str
) -> None:
    client = gateway.client(default_headers={"X-Toolbridge-Trace": trace})
    script(upstream)
    whole = client.chat.completions.create(model="m", messages=ASK)
    script(upstream)
    with client.chat.completions.stream(model="m", messages=ASK, stream_options={"include_usage": True}) as stream:
        final = stream.get_final_completion()
    assert final.id != whole.id
    assert final.choices[0].message.content == whole.choices[0].message.content
    assert final.choices[0].finish_reason == whole.choices[0].finish_reason == "stop"
    assert final.usage is not None and whole.usage is not None
    assert final.usage.total_tokens == whole.usage.total_tokens


def test_progress_reaches_the_reasoning_with_the_details_trace_too(gateway: Gateway, upstream: FakeUpstream) -> None:
    """Issue 49: a details block is written once, when its call ends; the progress goes to the reasoning, which Open
    WebUI shows growing while the call runs."""
    upstream.script(Turn(calls=[Call("basic__steps", {"count": 2})]), Turn(content=ANSWER))
    chunks = raw_stream(gateway, "details")
    assert "basic__steps: step 1 (1/2)\nbasic__steps: step 2 (2/2)\n" in joined(chunks, "reasoning_content")
    assert '<details type="tool_calls" done="true"' in joined(chunks, "content")


def test_a_chatty_server_s_progress_is_thinned_to_one_note_a_while_and_its_last(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    upstream.script(Turn(calls=[Call("basic__steps", {"count": 300})]), Turn(content=ANSWER))
    reasoning = joined(raw_stream(gateway, "reasoning"), "reasoning_content")
    shown = re.findall(r"basic__steps: step (\d+) \(\d+/300\)", reasoning)
    assert shown[0] == "1" and shown[-1] == "300"  # the first note, and the last
    # One note each half second: 300 notes sent at once are a handful (without the bound, 300 lines).
    assert len(shown) <= 10, shown
