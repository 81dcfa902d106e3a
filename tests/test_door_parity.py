"""Every door serves the same tool loop: toolsets, the tools header, the tool budget, slash commands, approvals,
servers' questions, memory, the trace modes, the rounds limit, upstream failures, images and the sign-in link
for the person, through Chat Completions (the reference), the Responses API, Anthropic's Messages API and
Ollama's API, each driven by its official client (openai `responses`, `anthropic`, `ollama`) over real HTTP,
whole and streamed, with real stdio MCP servers.

Each conversation's words name its door and mode: memory and approvals are found by what the client sends back,
so a door that stored nothing must not find another door's turn."""

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx
import ollama
import openai
import pytest

from app.chat.loop.decision import stopped_note
from tests.chat.offer.test_sign_in_chat import OPS, gateway_with_a_protected_server, link
from tests.conftest import BASIC_TOOLS, Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn

ROUNDS = 1  # TOOLBRIDGE_MAX_TOOL_ROUNDS here: one round of tools, then the model must answer
IMAGE = re.compile(r"!\[🖼 [^\]]*\]\((http://[^)\s]+/images/[\w-]+)\)")
BUDGET = 3  # TOOLBRIDGE_TOOL_BUDGET of the budgeted gateway: of the basic server's 12 tools
TRACE_KINDS = {"reasoning", "mcp_call", "thinking"}


@dataclass
class Said:
    """What a door's client made of an answer, in words every door has."""

    text: str
    reasoning: str
    kinds: list[str]  # the answer's items (Responses), blocks (Messages), "thinking" (Ollama), "reasoning" (chat)
    model: str
    ending: str  # the door's own word for how it ended
    keep: list[Any] = field(default_factory=list)  # what the client sends back of it as history
    id: str = ""


def ask_chat(gateway: Gateway, history: list[Any], stream: bool, headers: dict[str, str], model: str,
             system: str = "") -> Said:
    client = gateway.client(default_headers=headers)
    history = [{"role": "system", "content": system}, *history] if system else history
    if stream:
        chunks = [c for c in client.chat.completions.create(model=model, messages=history, stream=True) if c.choices]
        text = "".join(c.choices[0].delta.content or "" for c in chunks)
        reasoning = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in chunks)
        ending, named = next(c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason), chunks[0].model
    else:
        whole = client.chat.completions.create(model=model, messages=history)
        text, ending, named = whole.choices[0].message.content or "", whole.choices[0].finish_reason, whole.model
        reasoning = (whole.choices[0].message.model_extra or {}).get("reasoning_content") or ""
    return Said(text, reasoning, ["reasoning"] if reasoning else [], named, ending,
                [{"role": "assistant", "content": text}])


def ask_responses(gateway: Gateway, history: list[Any], stream: bool, headers: dict[str, str], model: str,
                  system: str = "", **extra: Any) -> Said:
    client = gateway.client(default_headers=headers)
    if system:
        extra["instructions"] = system
    if stream:  # as the Agents SDK reads it (the SDK's `stream()` helper raises on an incomplete response)
        events = list(client.responses.create(model=model, input=history, stream=True, **extra))
        assert events[-1].type in ("response.completed", "response.incomplete")
        response = events[-1].response  # type: ignore[union-attr]
    else:
        response = client.responses.create(model=model, input=history, **extra)
    reasoning = "".join(part.text for item in response.output if item.type == "reasoning"
                        for part in item.content or [])
    return Said(response.output_text, reasoning, [item.type for item in response.output], response.model,
                response.status or "", [item.model_dump(exclude_none=True) for item in response.output], response.id)


def ask_messages(gateway: Gateway, history: list[Any], stream: bool, headers: dict[str, str], model: str,
                 system: str = "") -> Said:
    client = anthropic.Anthropic(base_url=gateway.url, api_key="sk-any", max_retries=0, default_headers=headers)
    extra: dict[str, Any] = {"system": system} if system else {}
    if stream:
        with client.messages.stream(model=model, max_tokens=1000, messages=history, **extra) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(model=model, max_tokens=1000, messages=history, **extra)
    text = "".join(block.text for block in message.content if block.type == "text")
    reasoning = "".join(block.thinking for block in message.content if block.type == "thinking")
    return Said(text, reasoning, [block.type for block in message.content], message.model, message.stop_reason or "",
                [{"role": "assistant", "content": message.content}])


def ask_ollama(gateway: Gateway, history: list[Any], stream: bool, headers: dict[str, str], model: str,
               system: str = "") -> Said:
    client = ollama.Client(host=gateway.url, headers=headers)
    history = [{"role": "system", "content": system}, *history] if system else history
    if stream:
        parts = list(client.chat(model=model, messages=history, stream=True))
    else:
        parts = [client.chat(model=model, messages=history, stream=False)]
    text = "".join(part.message.content or "" for part in parts)
    reasoning = "".join(part.message.thinking or "" for part in parts)
    kept: dict[str, Any] = {"role": "assistant", "content": text} | ({"thinking": reasoning} if reasoning else {})
    return Said(text, reasoning, ["thinking"] if reasoning else [], parts[-1].model or "", parts[-1].done_reason or "",
                [kept])


Ask = Callable[[Gateway, list[Any], bool, dict[str, str], str, str], Said]
DOORS: dict[str, Ask] = {"chat": ask_chat, "responses": ask_responses, "messages": ask_messages, "ollama": ask_ollama}
NEW_DOORS = ["responses", "messages", "ollama"]
# How each door says "the answer ended normally".
FINISHED = {"chat": "stop", "responses": "completed", "messages": "end_turn", "ollama": "stop"}


@pytest.fixture(scope="module")
def doors(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    servers = {name: stdio_entry(f"{name}.py") for name in ("basic", "files", "library", "pictures", "asks")}
    with running_gateway(tmp_path_factory.mktemp("doors"), servers, ready=tuple(servers),
                         upstream_url=f"{upstream.url}/v1", toolsets={"basics": ["basic"]},
                         max_tool_rounds=ROUNDS) as gateway:
        yield gateway


def ask(gateway: Gateway, door: str, history: list[Any], *, stream: bool, headers: dict[str, str] | None = None,
        model: str = MODEL, system: str = "") -> Said:
    """The door's answer; `system` in the door's own spelling (Responses' instructions, Messages' system)."""
    return DOORS[door](gateway, history, stream, headers or {}, model, system)


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def offered(upstream: FakeUpstream) -> list[str]:
    return [tool["function"]["name"] for tool in upstream.chat_requests()[0].get("tools") or []]


def after_system(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] != "system"]


def each_door(doors: list[str]) -> Any:
    """Parametrizes a test over these doors, whole and streamed."""
    return pytest.mark.parametrize(("door", "stream"), [(d, s) for d in doors for s in (False, True)],
                                   ids=[f"{d}-{'streamed' if s else 'whole'}" for d in doors for s in (False, True)])


# -- toolsets and the tools header -------------------------------------------------------------------------------


@each_door([*NEW_DOORS, "chat"])
def test_a_virtual_model_offers_only_its_toolsets_tools(
    doors: Gateway, upstream: FakeUpstream, door: str, stream: bool
) -> None:
    upstream.script(Turn(content="ok"))
    said = ask(doors, door, [user("Which tools?")], stream=stream, model=f"{MODEL}+basics")
    assert said.text == "ok" and said.model == f"{MODEL}+basics"  # the client sees the model it chose
    assert upstream.chat_requests()[0]["model"] == MODEL
    assert offered(upstream) == [f"basic__{name}" for name in BASIC_TOOLS]


@each_door([*NEW_DOORS, "chat"])
def test_the_tools_header_chooses_the_tools(doors: Gateway, upstream: FakeUpstream, door: str, stream: bool) -> None:
    upstream.script(Turn(content="ok"))
    ask(doors, door, [user("Which tools?")], stream=stream, headers={"X-Toolbridge-Tools": "basic__echo, files"})
    assert offered(upstream) == ["basic__echo", "files__read_note", "files__delete_note", "files__write_note"]


# -- slash commands ----------------------------------------------------------------------------------------------


@each_door([*NEW_DOORS, "chat"])
def test_the_gateway_answers_prompts_itself(doors: Gateway, upstream: FakeUpstream, door: str, stream: bool) -> None:
    upstream.script()
    history = [user(f"hi from {door} {stream}"), {"role": "assistant", "content": "Hello."}, user("/prompts")]
    said = ask(doors, door, history, stream=stream)
    assert "`/greet name=… [style=…]`: Greets someone." in said.text and "`/review code=…`" in said.text
    assert said.ending == FINISHED[door] and upstream.chat_requests() == []
    # Later, the line and the gateway's answer are left out of what the model sees.
    upstream.script(Turn(content="ok"))
    ask(doors, door, [*history, *said.keep, user("Thanks.")], stream=stream)
    assert after_system(upstream.chat_requests()[0]) == [*history[:2], user("Thanks.")]


@each_door([*NEW_DOORS, "chat"])
def test_a_prompts_slash_command_is_expanded(doors: Gateway, upstream: FakeUpstream, door: str, stream: bool) -> None:
    upstream.script(Turn(content="Hello, Ada!"))
    said = ask(doors, door, [user('/greet name=Ada style="very warm"')], stream=stream)
    assert said.text == "Hello, Ada!"
    assert after_system(upstream.chat_requests()[0]) == [user("Write a very warm greeting for Ada.")]


# -- approvals -----------------------------------------------------------------------------------------------------


@each_door([*NEW_DOORS, "chat"])
def test_a_tool_that_asks_first_runs_after_the_persons_yes(
    doors: Gateway, upstream: FakeUpstream, door: str, stream: bool
) -> None:
    note = f"{door}-{stream}"
    upstream.script(Turn(content="Writing it.", calls=[Call("files__write_note", {"name": note, "text": "milk"})]),
                    Turn(content="Deleting it.", calls=[Call("files__delete_note", {"name": note})]))
    history = [user(f"Write the note {note}, then delete it.")]
    asked = ask(doors, door, history, stream=stream)
    assert "The model wants to run a tool that needs your approval" in asked.text
    assert '**files__delete_note** on the server **files**' in asked.text and asked.ending == FINISHED[door]
    assert len(upstream.chat_requests()) == 2  # the delete did not run: the model was not asked again

    upstream.script(Turn(content="Deleted."))
    done = ask(doors, door, [*history, *asked.keep, user("yes")], stream=stream)
    assert done.text == "Deleted."
    [request] = upstream.chat_requests()
    results = [json.loads(m["content"])["data"] for m in request["messages"] if m["role"] == "tool"]
    assert results == [{"result": f"wrote '{note}'"}, {"result": f"deleted '{note}'"}]
    assert "approval" not in json.dumps(request)  # the model never sees the question or the yes


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_yes_by_previous_response_id_runs_the_call(doors: Gateway, upstream: FakeUpstream, stream: bool) -> None:
    note = f"previous-{stream}"
    upstream.script(Turn(content="Deleting it.", calls=[Call("files__delete_note", {"name": note})]))
    asked = ask_responses(doors, [user(f"Delete the note {note}.")], stream, {}, MODEL)
    assert "needs your approval" in asked.text
    upstream.script(Turn(content="Deleted."))
    done = ask_responses(doors, [user("yes")], stream, {}, MODEL, previous_response_id=asked.id)
    assert done.text == "Deleted."
    tool = after_system(upstream.chat_requests()[0])[-1]
    assert tool["role"] == "tool" and json.loads(tool["content"])["data"] == {"result": f"no note '{note}'"}


@each_door([*NEW_DOORS, "chat"])
def test_a_servers_question_is_asked_and_the_next_message_answers_it(
    doors: Gateway, upstream: FakeUpstream, door: str, stream: bool
) -> None:
    upstream.script(Turn(content="Booking.", calls=[Call("asks__book_table", {"restaurant": "Luigi"})]))
    history = [user(f"Book Luigi ({door}, {stream}).")]
    asked = ask(doors, door, history, stream=stream)
    assert "for how many people, and when?" in asked.text and "party_size" in asked.text
    upstream.script(Turn(content="Booked for four."))
    done = ask(doors, door, [*history, *asked.keep, user("party_size: 4\ntime: 19:30")], stream=stream)
    assert done.text == "Booked for four."
    tool = after_system(upstream.chat_requests()[0])[-1]
    assert json.loads(tool["content"])["data"] == {"result": "booked Luigi for 4 at 19:30"}


# -- memory ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("system", ["", "Be brief."], ids=["no-system", "system"])
@each_door(NEW_DOORS)
def test_the_next_turn_gets_the_earlier_mcp_call_and_result(
    doors: Gateway, upstream: FakeUpstream, door: str, stream: bool, system: str
) -> None:
    """The client sends back what it keeps of the answer (Responses: its output items; Messages: the content
    blocks, thinking too; Ollama: the message with its thinking), with the system prompt in the door's words."""
    words = f"memory of {door} {stream} {system}"
    upstream.script(Turn(content="Let me check.", calls=[Call("basic__echo", {"text": words})]),
                    Turn(content="It echoed."))
    history = [user(f"Echo '{words}'.")]
    first = ask(doors, door, history, stream=stream, system=system)
    assert first.text == "Let me check.\n\nIt echoed." and "basic__echo" in first.reasoning
    upstream.script(Turn(content="It said so."))
    ask(doors, door, [*history, *first.keep, user("What did it say?")], stream=stream, system=system)
    sent = after_system(upstream.chat_requests()[0])
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[1]["tool_calls"][0]["function"]["name"] == "basic__echo"
    assert json.loads(sent[2]["content"])["data"] == {"result": f"echo: {words}"}


# -- the tool budget -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def budgeted(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with running_gateway(tmp_path_factory.mktemp("budget"), {"basic": stdio_entry("basic.py")}, ready=("basic",),
                         upstream_url=f"{upstream.url}/v1", tool_budget=BUDGET) as gateway:
        yield gateway


@each_door([*NEW_DOORS, "chat"])
def test_the_budget_offers_the_relevant_tools_and_those_called_before(
    budgeted: Gateway, upstream: FakeUpstream, door: str, stream: bool
) -> None:
    """Ranked by the user's words as the door gave them; the earlier turn's call kept, known from memory."""
    question = user(f"How is the weather in Oslo ({door}, {stream})?")
    upstream.script(Turn(calls=[Call("basic__get_weather", {"city": "Oslo"})]), Turn(content="Sunny."))
    first = ask(budgeted, door, [question], stream=stream)
    assert "basic__get_weather" in offered(upstream) and len(offered(upstream)) == BUDGET
    upstream.script(Turn(content="5"))
    ask(budgeted, door, [question, *first.keep, user("Add 2 and 3.")], stream=stream)
    assert {"basic__get_weather", "basic__add"} <= set(offered(upstream)) and len(offered(upstream)) == BUDGET


CLIENT_TOOL = {"name": "get_location", "description": "Where the person is.",
               "parameters": {"type": "object", "properties": {}}}


def mixed_turn(gateway: Gateway, door: str, history: list[Any], result: str) -> list[Any]:
    """The door's client asked with its own tool, given the call, answering it: the history it sends next, whole
    answers (the client's tool results in the door's words: `tool` messages, `function_call_output` items,
    `tool_result` blocks, `tool` messages with the call's id)."""
    if door == "chat":
        message = gateway.client().chat.completions.create(
            model=MODEL, messages=history, tools=[{"type": "function", "function": CLIENT_TOOL}]).choices[0].message
        [call] = message.tool_calls or []
        return [*history, message.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": call.id,
                                                                  "content": result}]
    if door == "responses":
        response = gateway.client().responses.create(model=MODEL, input=history,
                                                     tools=[{"type": "function", **CLIENT_TOOL}])  # type: ignore[list-item]
        [call] = [item for item in response.output if item.type == "function_call"]
        return [*history, *[item.model_dump(exclude_none=True) for item in response.output],
                {"type": "function_call_output", "call_id": call.call_id, "output": result}]  # type: ignore[union-attr]
    if door == "messages":
        client = anthropic.Anthropic(base_url=gateway.url, api_key="sk-any", max_retries=0)
        tool = {"name": CLIENT_TOOL["name"], "description": CLIENT_TOOL["description"],
                "input_schema": CLIENT_TOOL["parameters"]}
        message = client.messages.create(model=MODEL, max_tokens=1000, messages=history, tools=[tool])  # type: ignore[list-item]
        [use] = [block for block in message.content if block.type == "tool_use"]
        return [*history, {"role": "assistant", "content": message.content},
                user([{"type": "tool_result", "tool_use_id": use.id, "content": result}])]  # type: ignore[arg-type]
    # Raw, with the calls' ids sent back as Ollama's server takes them: the `ollama` library drops them (its
    # ToolCall has no id), and memory finds such a turn by them (docs/doors.md, "What every door shares").
    answer = httpx.post(f"{gateway.url}/api/chat", timeout=30, json={
        "model": MODEL, "messages": history, "stream": False,
        "tools": [{"type": "function", "function": CLIENT_TOOL}]}).json()
    [call] = answer["message"]["tool_calls"]
    return [*history, answer["message"], {"role": "tool", "tool_call_id": call["id"], "content": result}]


@pytest.mark.parametrize("door", [*NEW_DOORS, "chat"])
def test_a_turn_that_ran_mcp_tools_then_handed_the_client_its_own_is_remembered(
    doors: Gateway, upstream: FakeUpstream, door: str
) -> None:
    """The MCP call's result, before the client's own call in the same turn, reaches the model on the next
    request, found by the ids of the client's calls that the client sends back."""
    words = f"mixed {door}"
    upstream.script(Turn(calls=[Call("basic__echo", {"text": words})]),
                    Turn(content="Where are you?", calls=[Call("get_location", {})]))
    history = mixed_turn(doors, door, [user(f"Echo '{words}', then find me.")], "Paris")
    upstream.script(Turn(content="You are in Paris."))
    if door == "ollama":  # raw again: the library would drop the ids
        answer = httpx.post(f"{doors.url}/api/chat", json={"model": MODEL, "messages": history, "stream": False},
                            timeout=30)
        assert answer.json()["message"]["content"] == "You are in Paris."
    else:
        assert ask(doors, door, history, stream=False).text == "You are in Paris."
    sent = after_system(upstream.chat_requests()[0])
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "tool"]
    assert json.loads(sent[2]["content"])["data"] == {"result": f"echo: {words}"}
    assert sent[4]["content"] == "Paris"


# -- trace modes -------------------------------------------------------------------------------------------------


@each_door([*NEW_DOORS, "chat"])
def test_trace_details_puts_the_block_in_the_text(doors: Gateway, upstream: FakeUpstream, door: str,
                                                  stream: bool) -> None:
    upstream.script(Turn(calls=[Call("basic__echo", {"text": "hi"})]), Turn(content="It said hi."))
    said = ask(doors, door, [user("Echo hi.")], stream=stream, headers={"X-Toolbridge-Trace": "details"})
    assert '<details type="tool_calls" done="true"' in said.text and 'name="basic__echo"' in said.text
    assert said.text.endswith("It said hi.") and "basic__echo" not in said.reasoning


@each_door([*NEW_DOORS, "chat"])
def test_trace_off_shows_no_trace_anywhere(doors: Gateway, upstream: FakeUpstream, door: str, stream: bool) -> None:
    upstream.script(Turn(calls=[Call("basic__echo", {"text": "hi"})]), Turn(content="It said hi."))
    said = ask(doors, door, [user("Echo hi.")], stream=stream, headers={"X-Toolbridge-Trace": "off"})
    assert said.text == "It said hi." and said.reasoning == ""
    assert not TRACE_KINDS & set(said.kinds)


# -- limits ----------------------------------------------------------------------------------------------------------


@each_door([*NEW_DOORS, "chat"])
def test_the_rounds_limit_ends_the_answer_as_the_chat_door_does(
    doors: Gateway, upstream: FakeUpstream, door: str, stream: bool
) -> None:
    upstream.script(Turn(calls=[Call("basic__echo", {"text": "1"})]), Turn(calls=[Call("basic__echo", {"text": "2"})]))
    said = ask(doors, door, [user("Echo forever.")], stream=stream)
    assert said.text == stopped_note(ROUNDS) and said.ending == FINISHED[door]
    assert len(upstream.chat_requests()) == ROUNDS + 1


def cut_at_the_token_limit() -> Turn:
    """A recorded upstream stream that stops at the model's token limit after a word."""
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": MODEL,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    return Turn(raw=[chunk({"role": "assistant", "content": "Once upon"}), chunk({}, "length")])


# How each door says the model ran out of tokens.
CUT = {"chat": "length", "responses": "incomplete", "messages": "max_tokens", "ollama": "length"}


@each_door([*NEW_DOORS, "chat"])
def test_the_models_token_limit_ends_the_answer_in_the_doors_words(
    doors: Gateway, upstream: FakeUpstream, door: str, stream: bool
) -> None:
    upstream.script(Turn(calls=[Call("basic__echo", {"text": "hi"})]), cut_at_the_token_limit())
    said = ask(doors, door, [user("Tell a long story.")], stream=stream)
    assert said.text == "Once upon" and said.ending == CUT[door]


# -- images for the person -----------------------------------------------------------------------------------------


@each_door([*NEW_DOORS, "chat"])
def test_an_image_a_tool_returns_is_shown_in_the_text(
    doors: Gateway, upstream: FakeUpstream, door: str, stream: bool
) -> None:
    upstream.script(Turn(calls=[Call("pictures__picture", {"kilobytes": 1})]), Turn(content="Here it is."))
    said = ask(doors, door, [user("Show me a picture.")], stream=stream)
    [url] = IMAGE.findall(said.text)
    assert said.text.endswith("Here it is.") and httpx.get(url).headers["content-type"] == "image/png"


# -- upstream failures ---------------------------------------------------------------------------------------------

# Each door's path and the least of its request.
RAW = {
    "chat": ("/v1/chat/completions", {"messages": [user("Echo hi.")]}),
    "responses": ("/v1/responses", {"input": "Echo hi."}),
    "messages": ("/v1/messages", {"max_tokens": 100, "messages": [user("Echo hi.")]}),
    "ollama": ("/api/chat", {"messages": [user("Echo hi.")]}),
}


def error_message(door: str, error: Any) -> str:
    """The message of an error in the door's own shape (a body, an event, a line), or a failed assertion."""
    if door == "ollama":
        assert isinstance(error["error"], str)
        return str(error["error"])
    if door == "messages":
        assert error["type"] == "error" and isinstance(error["error"]["type"], str)
        return str(error["error"]["message"])
    if door == "responses" and error.get("type") == "response.failed":  # the stream's end, after its `error` event
        assert error["response"]["status"] == "failed"
        return str(error["response"]["error"]["message"])
    return str(error["error"]["message"])


@each_door([*NEW_DOORS, "chat"])
def test_a_failure_before_the_answer_began_is_an_http_error_in_the_doors_shape(
    doors: Gateway, upstream: FakeUpstream, door: str, stream: bool
) -> None:
    upstream.script(Turn(status=500, error="the model crashed"))
    path, body = RAW[door]
    response = httpx.post(f"{doors.url}{path}", json={"model": MODEL, "stream": stream, **body}, timeout=30)
    assert response.status_code == 502 and response.headers["content-type"].startswith("application/json")
    assert "the model crashed" in error_message(door, response.json())


def last_error(door: str, lines: list[str]) -> Any:
    """The stream's last payload: SSE's last `data:` (before chat's `[DONE]`), NDJSON's last line."""
    if door == "ollama":
        return json.loads(lines[-1])
    data = [line[6:] for line in lines if line.startswith("data: ") and line != "data: [DONE]"]
    return json.loads(data[-1])


@pytest.mark.parametrize("door", [*NEW_DOORS, "chat"])
def test_a_failure_after_the_answer_began_is_the_doors_in_stream_error(
    doors: Gateway, upstream: FakeUpstream, door: str
) -> None:
    upstream.script(Turn(content="Let me check.", calls=[Call("basic__echo", {"text": "hi"})]),
                    Turn(status=500, error="the model crashed"))
    path, body = RAW[door]
    with httpx.stream("POST", f"{doors.url}{path}", json={"model": MODEL, "stream": True, **body}, timeout=30) as raw:
        assert raw.status_code == 200
        lines = [line for line in raw.iter_lines() if line]
    assert "the model crashed" in error_message(door, last_error(door, lines))
    upstream.script(Turn(content="Let me check.", calls=[Call("basic__echo", {"text": "hi"})]),
                    Turn(status=500, error="the model crashed"))
    assert "the model crashed" in client_error(doors, door)


def client_error(gateway: Gateway, door: str) -> str:
    """What the door's client makes of an error in the stream: it raises it; the openai SDK's Responses stream
    hands it over as events instead, `error` and then `response.failed` (which Codex reads the message of)."""
    if door == "responses":
        events = list(gateway.client().responses.create(model=MODEL, input="Echo hi.", stream=True))
        assert [event.type for event in events][-2:] == ["error", "response.failed"]
        failed = events[-1].response  # type: ignore[union-attr]
        assert failed.status == "failed" and failed.error is not None and failed.error.message == events[-2].message  # type: ignore[union-attr]
        return str(failed.error.message)
    errors = {"chat": openai.APIError, "messages": anthropic.APIStatusError, "ollama": ollama.ResponseError}
    with pytest.raises(errors[door]) as caught:  # type: ignore[call-overload]
        ask(gateway, door, [user("Echo hi.")], stream=True)
    return str(caught.value)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_previous_response_id_with_instructions_each_turn_keeps_memory(
    doors: Gateway, upstream: FakeUpstream, stream: bool
) -> None:
    """As the Agents SDK and Codex continue: the instructions sent again with every request."""
    words = f"chained {stream}"
    upstream.script(Turn(content="Let me check.", calls=[Call("basic__echo", {"text": words})]),
                    Turn(content="It echoed."))
    first = ask_responses(doors, [user(f"Echo '{words}'.")], stream, {}, MODEL, "Be brief.")
    upstream.script(Turn(content="It said so."))
    ask_responses(doors, [user("What did it say?")], stream, {}, MODEL, "Be brief.", previous_response_id=first.id)
    sent = upstream.chat_requests()[0]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[0]["content"].startswith("Be brief.")
    assert json.loads(sent[3]["content"])["data"] == {"result": f"echo: {words}"}


# -- the sign-in notice ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def protected(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with gateway_with_a_protected_server(tmp_path_factory.mktemp("protected"), upstream) as gateway:
        yield gateway


@each_door([*NEW_DOORS, "chat"])
def test_the_sign_in_link_is_shown_once_per_chat(
    protected: Gateway, upstream: FakeUpstream, door: str, stream: bool
) -> None:
    """The answer carries the link; the next request, its history as the door's client keeps it, has it already."""
    key = {"Authorization": f"Bearer {OPS}"}
    history = [user(f"Who am I, {door} {stream}?")]
    upstream.script(Turn(content="I cannot tell yet."))
    first = ask(protected, door, history, stream=stream, headers=key)
    assert first.text == f"I cannot tell yet.\n\n> 🔑 To use protected's tools, sign in: {link(protected)}"
    upstream.script(Turn(content="Still not."))
    second = ask(protected, door, [*history, *first.keep, user("And now?")], stream=stream, headers=key)
    assert second.text == "Still not."
    assert "sign-in" not in json.dumps(after_system(upstream.chat_requests()[0]))
