"""Conversations that remember: the second and third turns' upstream requests hold the earlier turns' MCP
calls and results, in every trace mode, as Open WebUI and the openai SDK send their histories back."""

import json
import stat
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from structlog.testing import capture_logs

import app.chat.memory.entry
from app.chat.memory.conversation import ConversationMemory, MemoryStores
from app.openai.result_format import RenderOptions
from app.state.store import Bounds, MemoryStore
from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn

TRACES = ["reasoning", "details", "markdown", "off"]
# One of Open WebUI's own 36 tools: it sends them with every chat and runs them itself.
OWUI_TOOL = {"type": "function", "function": {"name": "get_current_timestamp", "description": "Now.",
                                              "parameters": {"type": "object", "properties": {}}}}


def ask(client: openai.OpenAI, messages: list[dict[str, Any]], *, stream: bool, **extra: Any) -> str:
    """The assistant's content as the client keeps it: everything in `content`, never the reasoning."""
    if not stream:
        return client.chat.completions.create(model="m", messages=messages, **extra).choices[0].message.content or ""
    chunks = client.chat.completions.create(model="m", messages=messages, stream=True, **extra)
    return "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)


def tool_turn(text: str, answer: str) -> list[Turn]:
    return [Turn(content="Let me check.", calls=[Call("basic__echo", {"text": text})]), Turn(content=answer)]


def seen_rounds(upstream: FakeUpstream) -> list[dict[str, Any]]:
    """The call and result messages the model saw in the last request's final round."""
    last = upstream.chat_requests()[-1]["messages"]
    return last[-2:]


def after_system(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["role"] != "system"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("trace", TRACES)
def test_three_turns_as_the_sdk_sends_them_hold_every_earlier_call_and_result(
    gateway: Gateway, upstream: FakeUpstream, trace: str, stream: bool
) -> None:
    client = gateway.client(default_headers={"X-Toolbridge-Trace": trace})
    history: list[dict[str, Any]] = [{"role": "user", "content": f"Echo one ({trace}, {stream})."}]
    expected: list[dict[str, Any]] = [history[0]]
    for number, text in enumerate(["one", "two"]):
        upstream.script(*tool_turn(text, f"It said {text}."))
        content = ask(client, history, stream=stream)
        assert content.endswith(f"It said {text}.")
        assert after_system(upstream.chat_requests()[0]["messages"]) == expected  # the earlier turns, restored
        expected += [*seen_rounds(upstream), {"role": "assistant", "content": f"It said {text}."}]
        question = {"role": "user", "content": f"Now echo two ({number})." if text == "one" else "What did they say?"}
        history += [{"role": "assistant", "content": content}, question]
        expected.append(question)

    upstream.script(Turn(content="They said one, then two."))
    ask(client, history, stream=stream)
    sent = after_system(upstream.chat_requests()[0]["messages"])
    assert sent == expected
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user",
                                         "assistant", "tool", "assistant", "user"]
    assert json.loads(sent[2]["content"])["data"] == {"result": "echo: one"}
    assert json.loads(sent[6]["content"])["data"] == {"result": "echo: two"}


@pytest.mark.parametrize("trace", TRACES)
def test_open_webui_gets_its_memory_back_and_its_own_tool_turns_untouched(
    gateway: Gateway, upstream: FakeUpstream, trace: str
) -> None:
    # Open WebUI streams, sends its own tools and its chat id, and keeps only `content` (with the trace
    # when it is in the content).
    client = gateway.client(default_headers={"X-Toolbridge-Trace": trace, "X-OpenWebUI-Chat-Id": f"chat-{trace}"})
    question = {"role": "user", "content": "What time is it in UTC?"}
    upstream.script(*tool_turn("utc", "It is noon in UTC."))
    content = ask(client, [question], stream=True, tools=[OWUI_TOOL])
    first_call, first_result = seen_rounds(upstream)

    # The second turn is one of Open WebUI's own tool calls, which it ran and sends back itself.
    own_turn = [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "owui-1", "type": "function", "function": {
            "name": "get_current_timestamp", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "owui-1", "content": "1763900000"},
        {"role": "assistant", "content": "The timestamp is 1763900000."},
    ]
    history = [question, {"role": "assistant", "content": content},
               {"role": "user", "content": "And the timestamp?"}, *own_turn,
               {"role": "user", "content": "What did the tool return before?"}]
    upstream.script(Turn(content="It returned echo: utc."))
    ask(client, history, stream=True, tools=[OWUI_TOOL])
    sent = after_system(upstream.chat_requests()[0]["messages"])
    assert sent == [question, first_call, first_result, {"role": "assistant", "content": "It is noon in UTC."},
                    history[2], *own_turn, history[-1]]


def test_a_restart_keeps_memory_in_sqlite_and_not_in_memory(tmp_path: Path, upstream: FakeUpstream) -> None:
    servers = {"basic": stdio_entry("basic.py")}
    settings = {"upstream_url": f"{upstream.url}/v1", "tool_trace": "off"}
    question = {"role": "user", "content": "Echo persist."}
    for url in (f"sqlite:///{tmp_path / 'kept' / 'state.db'}", "memory://"):
        with running_gateway(tmp_path, servers, ready=["basic"], state_url=url, **settings) as first:
            upstream.script(*tool_turn("persist", "It said persist."))
            content = ask(first.client(), [question], stream=False)
            call, result = seen_rounds(upstream)
        with running_gateway(tmp_path, servers, ready=["basic"], state_url=url, **settings) as second:
            assert httpx.get(f"{second.url}/health").json()["memory"] == {"store": url.partition(":")[0]}
            upstream.script(Turn(content="persist"))
            history = [question, {"role": "assistant", "content": content}, {"role": "user", "content": "Again?"}]
            ask(second.client(), history, stream=False)
        sent = after_system(upstream.chat_requests()[0]["messages"])
        if url == "memory://":
            assert sent == history  # gone with the process
        else:
            assert sent == [question, call, result, {"role": "assistant", "content": "It said persist."}, history[-1]]
    db = tmp_path / "kept" / "state.db"
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    assert b"echo: persist" not in db.read_bytes()[:100]  # sanity: a real SQLite file, not a text dump
    assert db.read_bytes().startswith(b"SQLite format 3")


@pytest.mark.parametrize("chat_ids", [False, True], ids=["different-questions", "same-question-two-chat-ids"])
def test_two_chats_whose_answers_are_the_same_sentence_restore_their_own_calls(
    gateway: Gateway, upstream: FakeUpstream, chat_ids: bool
) -> None:
    answer = "Done, the echo answered."  # the same in both chats
    sent_calls = {}
    for chat in ("a", "b"):
        question = {"role": "user", "content": "Echo my word." if chat_ids else f"Echo {chat}-word."}
        headers = {"X-OpenWebUI-Chat-Id": f"same-sentence-{chat}"} if chat_ids else {}
        client = gateway.client(default_headers=headers | {"X-Toolbridge-Trace": "off"})
        upstream.script(*tool_turn(f"{chat}-word {chat_ids}", answer))
        assert ask(client, [question], stream=False) == "Let me check.\n\n" + answer
        sent_calls[chat] = (question, client)
    for chat, (question, client) in sent_calls.items():
        upstream.script(Turn(content="ok"))
        ask(client, [question, {"role": "assistant", "content": "Let me check.\n\n" + answer},
                     {"role": "user", "content": "Which word?"}], stream=False)
        sent = after_system(upstream.chat_requests()[0]["messages"])
        assert json.loads(sent[2]["content"])["data"] == {"result": f"echo: {chat}-word {chat_ids}"}


def test_a_turn_whose_earlier_messages_changed_is_not_restored_and_the_log_says_so(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    client = gateway.client(default_headers={"X-Toolbridge-Trace": "off"})
    upstream.script(*tool_turn("changed", "It said changed."))
    content = ask(client, [{"role": "user", "content": "Echo changed, at 10:00."}], stream=False)
    upstream.script(Turn(content="ok"))
    history = [{"role": "user", "content": "Echo changed, at 10:01."},  # a client that rewrote it
               {"role": "assistant", "content": content}, {"role": "user", "content": "And?"}]
    with capture_logs() as logs:
        ask(client, history, stream=False)
    assert after_system(upstream.chat_requests()[0]["messages"]) == history
    [line] = [entry for entry in logs if entry["event"] == "turn_not_restored"]
    assert line["reason"] == "the messages before it differ from when it was stored"
    assert "changed" not in json.dumps(line)  # no message content in the log


def big_turns(upstream: FakeUpstream, client: openai.OpenAI, model: str) -> list[dict[str, Any]]:
    """Two turns whose results are 6,000 characters each; returns the history for a third."""
    history: list[dict[str, Any]] = []
    for letter in "ab":
        history.append({"role": "user", "content": f"Echo many {letter}s ({model})."})
        upstream.script(Turn(calls=[Call("basic__echo", {"text": letter * 6000})]), Turn(content=f"Many {letter}s."))
        content = client.chat.completions.create(model=model, messages=history).choices[0].message.content
        history.append({"role": "assistant", "content": content or ""})
    return [*history, {"role": "user", "content": "How many were there?"}]


def restored_results(upstream: FakeUpstream) -> list[str]:
    return [m["content"] for m in upstream.chat_requests()[0]["messages"] if m["role"] == "tool"]


def test_restored_results_that_would_not_fit_the_context_are_cut_oldest_first_then_left_out(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    servers = {"basic": stdio_entry("basic.py")}
    settings = {"upstream_url": f"{upstream.url}/v1", "tool_trace": "off", "max_result_chars": 50_000}

    def third_turn(context_tokens: int, history: list[dict[str, Any]] | None = None) -> tuple[list[str], dict]:
        with running_gateway(tmp_path, servers, ready=["basic"], context_tokens=context_tokens, **settings) as gw:
            client = gw.client()
            history = history or big_turns(upstream, client, "m")
            upstream.script(Turn(content="Two."))
            client.chat.completions.create(model="m", messages=history, max_tokens=100)
            return restored_results(upstream), upstream.chat_requests()[0] | {"history": history}

    roomy, request = third_turn(1_000_000)
    assert [len(json.loads(r)["data"]["result"]) for r in roomy] == [6006, 6006]  # "echo: " and the letters
    # A context 3,000 characters short of the roomy request (3 characters a token, 100 kept for the answer).
    size = len(json.dumps(request["messages"], ensure_ascii=False, separators=(",", ":")))
    tools = len(json.dumps(request["tools"], ensure_ascii=False, separators=(",", ":")))
    tight, _ = third_turn((size + tools - 3000) // 3 + 100, request["history"])
    oldest, newest = (json.loads(r) for r in tight)
    assert newest == json.loads(roomy[1])  # untouched
    assert oldest["meta"]["truncated"]["total_chars"] == 6006 and len(tight[0]) < len(roomy[0]) - 2000
    assert oldest["data"]["result"].startswith("echo: aaa")

    hopeless, request = third_turn(400, request["history"])
    assert [json.loads(r)["status"] for r in hopeless] == ["omitted", "omitted"]
    assert "to fit the model's context" in json.loads(hopeless[0])["meta"]["note"]
    user_words = [m["content"] for m in request["messages"] if m["role"] == "user"]
    assert user_words == [m["content"] for m in request["history"] if m["role"] == "user"]  # never cut


def test_lm_studios_context_length_is_the_budget_unless_the_setting_says_otherwise(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    # The fake LM Studio says its loaded qwen3-8b has 8,192 tokens: two 6,000-character results and the
    # tool list do not fit. TOOLBRIDGE_CONTEXT_TOKENS, when set, wins over the report (the operator knows
    # the model was loaded bigger, or wants the results whole): at 1,000,000 they fit.
    servers = {"basic": stdio_entry("basic.py")}
    for setting, cut in ((None, True), (1_000_000, False)):
        folder = tmp_path / str(setting)
        folder.mkdir()
        with running_gateway(folder, servers, ready=["basic"], upstream_url=f"{upstream.url}/v1", tool_trace="off",
                             context_tokens=setting) as gw:
            client = gw.client()
            history = big_turns(upstream, client, MODEL)
            upstream.script(Turn(content="Two."))
            client.chat.completions.create(model=MODEL, messages=history)
            results = [json.loads(result) for result in restored_results(upstream)]
            assert ("truncated" in results[0].get("meta", {})) is cut


def test_without_a_store_details_traces_are_still_read_back_and_mixed_turns_still_finish(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    servers = {"basic": stdio_entry("basic.py")}
    with running_gateway(tmp_path, servers, ready=["basic"], upstream_url=f"{upstream.url}/v1",
                         state_url="none") as gw:
        assert httpx.get(f"{gw.url}/health").json()["memory"] == {"store": "none"}
        question = {"role": "user", "content": "Echo traced."}
        for trace in ("details", "off"):
            client = gw.client(default_headers={"X-Toolbridge-Trace": trace})
            upstream.script(*tool_turn("traced", "It said traced."))
            content = ask(client, [question], stream=False)
            call, result = seen_rounds(upstream)
            upstream.script(Turn(content="traced"))
            history = [question, {"role": "assistant", "content": content}, {"role": "user", "content": "Again?"}]
            ask(client, history, stream=False)
            sent = after_system(upstream.chat_requests()[0]["messages"])
            if trace == "details":  # from the trace itself: no state needed
                assert sent == [question, call, result, {"role": "assistant", "content": "It said traced."},
                                history[-1]]
            else:  # nothing kept, nothing to read back
                assert sent == history

        # A turn that calls Open WebUI's tool and ours is kept in the process until the client comes back.
        upstream.script(Turn(calls=[Call("get_current_timestamp", {}), Call("basic__echo", {"text": "mixed"})]))
        first = gw.client().chat.completions.create(model="m", messages=[question], tools=[OWUI_TOOL])
        handed = first.choices[0].message
        upstream.script(Turn(content="Both done."))
        back = [question, handed.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": handed.tool_calls[0].id, "content": "1763900000"}]
        gw.client().chat.completions.create(model="m", messages=back, tools=[OWUI_TOOL])
        sent = after_system(upstream.chat_requests()[0]["messages"])
        assert [c["function"]["name"] for c in sent[1]["tool_calls"]] == ["get_current_timestamp", "basic__echo"]
        assert {m["tool_call_id"] for m in sent if m["role"] == "tool"} == {c["id"] for c in sent[1]["tool_calls"]}


def test_a_long_text_is_keyed_in_slices_as_it_would_be_whole() -> None:
    # Sliced for the event loop's sake (see memory_keys.normal); a key that changed with the slicing would lose turns.
    from app.chat.memory.keys import _SLICE, _WHITESPACE, normal
    text = ("é 中 \U0001f600\t" * (_SLICE // 3))[: 3 * _SLICE + 5]
    assert normal(text, assistant=False) == text.encode("utf-8", "surrogatepass").translate(None, _WHITESPACE)


@pytest.mark.anyio
@pytest.mark.parametrize("with_calls", [True, False], ids=["with-calls", "prompt-only"])
async def test_a_prompt_past_the_entry_bound_is_left_out_and_the_turns_calls_kept(with_calls: bool) -> None:
    store = MemoryStore(Bounds(max_bytes=10**8, max_age_seconds=3600))
    memory = ConversationMemory(MemoryStores(turns=store, pending=store), RenderOptions(result_format="text"))
    slash = {"role": "user", "content": "/review code=big"}
    prompt = [{"role": "user", "content": "x" * (app.chat.memory.entry.MAX_ENTRY_BYTES + 1)}]
    rounds = [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "echoed"}] if with_calls else []
    await memory.restore([slash])
    with capture_logs() as logs:
        await memory.remember_turn(rounds, "Looked.", "Looked.", prompt)
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["prompt_not_remembered"]

    later = [slash, {"role": "assistant", "content": "Looked."}, {"role": "user", "content": "and?"}]
    restored = await ConversationMemory(MemoryStores(turns=store, pending=store),
                                        RenderOptions(result_format="text")).restore(later)
    assert restored.messages == [slash, *rounds, *later[1:]]  # the slash line as typed
