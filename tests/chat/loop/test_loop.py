"""The tool loop on its own (app/chat/loop/), driven by scripted fakes of its Protocols (app/chat/ports.py): a model
that plays back turns, tools that return set outcomes. Every loop rule in milliseconds; the same rules
through HTTP, real MCP servers and the openai SDK are tested in test_chat.py and test_mixed_tools.py."""

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from app.chat.answer.trace import render_finished
from app.chat.loop import Finished, LoopEvent, Started, ToolProgress, ToolsRan, ToolsStarted, run_tool_loop
from app.chat.memory.conversation import ConversationMemory, MemoryStores
from app.chat.ports import ALL_TOOLS, LoopOptions, RequestStats, ToolSelection
from app.chat.turn import Turn
from app.openai.accumulate import ToolCall
from app.openai.errors import AuthenticationFailed
from app.openai.markup import TextDelta
from app.openai.result_format import RenderOptions
from app.state.store import Bounds, MemoryStore

pytestmark = pytest.mark.anyio
FETCH = {"type": "function", "function": {"name": "fetch", "parameters": {"type": "object", "properties": {}}}}
CLIENT_TOOL = {"type": "function", "function": {"name": "open_page", "parameters": {"type": "object"}}}


@dataclass(frozen=True)
class Image:
    mime_type: str
    data: str


@dataclass
class Outcome:
    content: str
    is_error: bool = False
    images: Sequence[Any] = ()
    retryable: bool = False
    data: Any = None
    error_message: str | None = None
    input_needed: Any = None


@dataclass
class Tools:
    """The MCP side: offers `fetch`, answers each call with the next outcome, reports progress if told to."""

    outcomes: list[Outcome] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)
    offered: list[bool] = field(default_factory=list)
    progress: list[float] = field(default_factory=list)
    selections: list[ToolSelection] = field(default_factory=list)
    offer: bool = True
    confirm: set[str] = field(default_factory=set)  # the tools whose calls wait for the person's yes
    changed: dict[str, str] = field(default_factory=dict)  # the tools whose definitions changed since pinned: the diff
    memo: dict[str, object] = field(default_factory=dict)

    @property
    def openai_tools(self) -> Sequence[dict[str, Any]]:
        return [FETCH] if self.offer else []

    def tools_for_request(
        self, offered: bool, client_tools: frozenset[str], selection: ToolSelection = ALL_TOOLS
    ) -> "Tools":
        self.offered.append(offered)
        self.selections.append(selection)
        return self if offered else Tools(offer=False)

    def asks_first(self, name: str) -> bool:
        return name in self.confirm

    def server_of(self, name: str) -> str | None:
        return "web" if name == "fetch" else None

    def definition_change(self, name: str) -> str | None:
        return self.changed.get(name)

    def servers(self) -> dict[str, str]:
        return {name: server for tool in self.openai_tools
                if (server := self.server_of(name := tool["function"]["name"])) is not None}

    async def call_tool(self, name: str, arguments: str, on_progress: Any = None, answers: Any = None) -> Outcome:
        self.calls.append((name, arguments))
        for done in self.progress:
            await on_progress(done, 1.0, None)
        return self.outcomes.pop(0) if self.outcomes else Outcome(f"result of {arguments}")


def call(name: str, arguments: str = "{}", call_id: str = "c1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


@dataclass
class Model:
    """Plays back one turn per request: text, or tool calls; every request it was sent is kept. Once the
    script runs out, or when calling is forbidden, it answers "done"."""

    turns: list[str | list[dict[str, Any]]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    together: bool = False  # every chunk of a text turn in one batch, as an unpaced stream's read holds them

    @asynccontextmanager
    async def stream_chat(self, body: dict[str, Any]) -> AsyncIterator[AsyncIterator[list[dict[str, Any]]]]:
        self.requests.append(body)
        turn = self.turns.pop(0) if self.turns and body.get("tool_choice") != "none" else "done"

        async def chunks() -> AsyncIterator[list[dict[str, Any]]]:  # a chunk a read, as a paced model sends
            if isinstance(turn, str):
                words = [{"choices": [{"index": 0, "delta": {"content": word + " "}, "finish_reason": None}]}
                         for word in turn.split(" ")]
                for batch in [words] if self.together else [[word] for word in words]:
                    yield batch
                yield [{"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}]
            else:
                parts = [{"index": i, **c} for i, c in enumerate(turn)]
                yield [{"choices": [{"index": 0, "delta": {"tool_calls": parts}, "finish_reason": "tool_calls"}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}]

        yield chunks()


async def run(
    model: Model, tools: Tools, *, messages: list[dict[str, Any]] | None = None, client_tools: bool = False,
    stats: RequestStats | None = None, store: MemoryStore | None = None, remember: bool = True, **options: Any,
) -> list[LoopEvent]:
    body: dict[str, Any] = {"model": "m", "messages": messages or [{"role": "user", "content": "go"}]}
    if client_tools:
        body["tools"] = [CLIENT_TOOL]
    loop_options = LoopOptions(**({"max_tool_rounds": 5} | options))
    with anyio.fail_after(5):
        events = run_tool_loop(Turn.read(body), model, tools, loop_options, stats=stats,
                               memory=memory(store) if remember else None)
        return [event async for event in events]


def memory(store: MemoryStore | None = None) -> ConversationMemory:
    """One request's memory over `store` (a fresh one when None), results in plain text."""
    store = MemoryStore(Bounds(max_bytes=10**7, max_age_seconds=3600)) if store is None else store
    return ConversationMemory(MemoryStores(turns=store, pending=store), RenderOptions(result_format="text"))


def text(events: list[LoopEvent]) -> str:
    return "".join(e.content for e in events if isinstance(e, TextDelta))


async def test_an_answer_without_tools_is_relayed_as_it_comes() -> None:
    model, tools = Model(["hello there"]), Tools()
    events = await run(model, tools)
    assert isinstance(events[0], Started) and text(events) == "hello there "
    assert events[-1] == Finished("stop", events[-1].usage) and tools.calls == []
    assert model.requests[0]["tools"] == [FETCH]  # offered, not called


async def test_chunks_that_arrived_together_go_on_as_one_delta_with_their_markup_split() -> None:
    together = [e for e in await run(Model(["<think>why now</think> the answer"], together=True), Tools())
                if isinstance(e, TextDelta)]
    paced = [e for e in await run(Model(["<think>why now</think> the answer"]), Tools()) if isinstance(e, TextDelta)]
    assert together == [TextDelta(content=" the answer ", reasoning="why now")]
    assert len(paced) == 4  # a delta a chunk: nothing is held back for a batch that never comes
    assert "".join(d.content for d in paced) == " the answer " and "".join(d.reasoning for d in paced) == "why now"


async def test_a_tool_call_runs_and_its_result_is_fed_back_until_the_model_answers() -> None:
    model, tools = Model([[call("fetch", '{"page": 1}')], "page one says hi"]), Tools([Outcome("hi")])
    stats = RequestStats()
    events = await run(model, tools, stats=stats)
    kinds = [type(e).__name__ for e in events if not isinstance(e, TextDelta)]
    assert kinds == ["Started", "ToolsStarted", "ToolsRan", "Finished"]
    assert tools.calls == [("fetch", '{"page": 1}')]
    second = model.requests[1]["messages"]
    assert second[-2] == {"role": "assistant", "content": "", "tool_calls": [call("fetch", '{"page": 1}')]}
    assert second[-1] == {"role": "tool", "tool_call_id": "c1", "content": "hi"}
    assert (stats.rounds, stats.tools_called) == (2, ["fetch"])
    assert stats.usage is not None and stats.usage.total_tokens == 27  # summed over both rounds


async def test_calls_of_one_turn_run_together_and_their_progress_is_passed_on() -> None:
    turn = [call("fetch", '{"page": 1}', "a"), call("fetch", '{"page": 2}', "b")]
    model, tools = Model([turn]), Tools(progress=[0.5])
    events = await run(model, tools)
    ran = next(e for e in events if isinstance(e, ToolsRan))
    assert [c.id for c in ran.calls] == ["a", "b"] and len(ran.outputs) == 2
    assert sum(isinstance(e, ToolProgress) for e in events) == 2
    assert [m.get("tool_call_id") for m in model.requests[1]["messages"][-2:]] == ["a", "b"]


class Withdrawn(Tools):
    """Tools whose key is taken out after the first call: each later call ends the request."""

    async def call_tool(self, name: str, arguments: str, on_progress: Any = None, answers: Any = None) -> Outcome:
        if self.calls:
            raise AuthenticationFailed("taken out", code="key_withdrawn")
        return await super().call_tool(name, arguments, on_progress, answers)


async def test_a_call_that_ends_the_request_raises_its_own_error_not_a_group() -> None:
    # The second round's calls run together; one raising must end the request as that error (the stream's
    # error event), not as a group of them, which would be an internal error.
    turns = [[call("fetch")], [call("fetch", '{"page": 1}', "a"), call("fetch", '{"page": 2}', "b")]]
    tools = Withdrawn()
    with pytest.raises(AuthenticationFailed, match="taken out"):
        await run(Model(turns), tools)  # type: ignore[arg-type]
    assert tools.calls == [("fetch", "{}")]


async def test_a_client_tool_call_goes_back_to_the_client_untouched() -> None:
    model, tools = Model([[call("open_page", '{"url": "x"}')]]), Tools()
    events = await run(model, tools, client_tools=True)
    finished = events[-1]
    assert isinstance(finished, Finished) and finished.finish_reason == "tool_calls"
    assert [(c.name, c.arguments) for c in finished.client_tool_calls] == [("open_page", '{"url": "x"}')]
    assert tools.calls == [] and len(model.requests) == 1
    assert model.requests[0]["tools"] == [CLIENT_TOOL, FETCH]  # the client's own first


async def test_a_mixed_turn_runs_ours_hands_the_client_its_own_and_remembers_the_whole_turn() -> None:
    turn = [call("fetch", "{}", "ours"), call("open_page", "{}", "theirs")]
    store = MemoryStore(Bounds(max_bytes=10**7, max_age_seconds=3600))
    model, tools = Model([turn]), Tools([Outcome("fetched")])
    events = await run(model, tools, client_tools=True, store=store)
    assert tools.calls == [("fetch", "{}")]
    assert [c.id for c in events[-1].client_tool_calls] == ["theirs"]  # type: ignore[union-attr]
    # The client comes back with only its own call and result; the model sees the whole turn again.
    back = [{"role": "assistant", "content": None, "tool_calls": [call("open_page", "{}", "theirs")]},
            {"role": "tool", "tool_call_id": "theirs", "content": "opened"}]
    restored = (await memory(store).restore([{"role": "user", "content": "go"}, *back])).messages
    assert [c["id"] for c in restored[1]["tool_calls"]] == ["ours", "theirs"]
    assert restored[2] == {"role": "tool", "tool_call_id": "ours", "content": "fetched"}


async def test_a_model_that_keeps_calling_is_stopped_after_the_last_round_and_told_to_answer() -> None:
    rounds = [[call("fetch", f'{{"page": {n}}}')] for n in range(10)]
    model, tools = Model(rounds), Tools()
    events = await run(model, tools, max_tool_rounds=2)
    assert len(tools.calls) == 2
    assert [r.get("tool_choice") for r in model.requests] == [None, None, "none"]
    assert model.requests[-1]["tools"] == [FETCH]  # kept, so the history still makes sense
    assert text(events) == "done " and events[-1].finish_reason == "stop"  # type: ignore[union-attr]


@pytest.mark.parametrize("forced", ["required", {"type": "function", "function": {"name": "fetch"}}])
async def test_a_forced_first_call_is_not_forced_again(forced: Any) -> None:
    model = Model([[call("fetch")], "ok"])
    body = {"model": "m", "messages": [{"role": "user", "content": "go"}], "tool_choice": forced}
    async for _ in run_tool_loop(Turn.read(body), model, Tools(), LoopOptions(max_tool_rounds=5)):
        pass
    assert [r.get("tool_choice") for r in model.requests] == [forced, None]


async def test_a_repeat_of_a_call_already_answered_is_not_run_and_the_model_is_asked_to_answer() -> None:
    same = [call("fetch", '{"page": 1}')]
    model, tools = Model([same, [call("fetch", '{ "page":1 }', "c2")]]), Tools()
    await run(model, tools)
    assert len(tools.calls) == 1  # the same call in another spelling is still the same call
    assert [r.get("tool_choice") for r in model.requests] == [None, None, "none"]


async def test_a_call_that_timed_out_may_be_tried_again_and_its_repeat_after_success_is_not() -> None:
    rounds = [[call("fetch", '{"page": 1}', f"c{n}")] for n in range(3)]
    tools = Tools([Outcome("timed out", is_error=True, retryable=True), Outcome("page one")])
    model = Model(rounds)
    await run(model, tools)
    assert [a for _, a in tools.calls] == ['{"page": 1}', '{"page": 1}']  # the retry ran; the third did not
    assert [r.get("tool_choice") for r in model.requests] == [None, None, None, "none"]


async def test_a_call_that_failed_for_good_is_not_run_again() -> None:
    rounds = [[call("fetch", '{"page": 1}', f"c{n}")] for n in range(3)]
    tools = Tools([Outcome("no such page", is_error=True)])
    model = Model(rounds)
    await run(model, tools)
    assert len(tools.calls) == 1
    assert [r.get("tool_choice") for r in model.requests] == [None, None, "none"]


@pytest.mark.parametrize("sees", [True, False])
async def test_images_from_tools_reach_a_model_that_sees_them_in_a_user_turn(sees: bool) -> None:
    picture = Image("image/png", "aGk=")
    model, tools = Model([[call("fetch")], "a cat"]), Tools([Outcome("see image", images=[picture])])

    async def sees_images() -> bool:
        return sees

    await run(model, tools, sees_images=sees_images)
    last = model.requests[1]["messages"][-1]
    if sees:
        assert last["role"] == "user"
        assert last["content"][1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}}
    else:
        assert last["role"] == "tool"


async def test_no_tools_and_no_hint_are_sent_when_the_options_offer_none() -> None:
    model, tools = Model(["a title"]), Tools()
    await run(model, tools, offer_tools=False, system_hint="Read results carefully.")
    assert tools.offered == [False]
    assert "tools" not in model.requests[0] and model.requests[0]["messages"] == [{"role": "user", "content": "go"}]


async def test_the_system_hint_joins_the_clients_system_message_once() -> None:
    history = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "go"}]
    model, tools = Model(["ok"]), Tools()
    await run(model, tools, messages=history, system_hint="Read results carefully.")
    sent = model.requests[0]["messages"]
    assert sent[0] == {"role": "system", "content": "Be brief.\n\nRead results carefully."} and len(sent) == 2
    model = Model(["ok"])
    await run(model, tools, messages=sent, system_hint="Read results carefully.")
    assert model.requests[0]["messages"] == sent


@pytest.mark.parametrize(("history", "system"), [
    ([{"role": "developer", "content": "Be brief."}], {"role": "system", "content": "Be brief."}),
    ([{"role": "system", "content": "A."}, {"role": "developer", "content": [{"type": "text", "text": "B"}]}],
     {"role": "system", "content": "A.\n\nB"}),
    ([{"role": "user", "content": "go"}, {"role": "system", "content": "Later.", "name": "ops"}],
     {"role": "system", "content": "Later."}),
    ([{"role": "developer", "content": None}, {"role": "system", "content": ""}], {"role": "system", "content": ""}),
    ([{"role": "developer", "content": [{"type": "text", "text": "See"}, {"type": "image_url", "image_url": {}}]}],
     {"role": "system", "content": [{"type": "text", "text": "See"}, {"type": "image_url", "image_url": {}}]}),
])
async def test_system_and_developer_messages_reach_the_model_as_one_system_message_first(
    history: list[dict[str, Any]], system: dict[str, Any]
) -> None:
    model, tools = Model(["ok"]), Tools(offer=False)
    await run(model, tools, messages=[*history, {"role": "user", "content": "now"}], remember=False)
    sent = model.requests[0]["messages"]
    assert sent[0] == system
    assert sent[1:] == [m for m in [*history, {"role": "user", "content": "now"}] if m["role"] == "user"]


async def test_a_history_with_one_system_message_first_is_sent_as_it_is() -> None:
    history = [{"role": "system", "content": "Be brief.", "name": "ops"}, {"role": "user", "content": "go"}]
    model, tools = Model(["ok"]), Tools(offer=False)
    await run(model, tools, messages=history, remember=False)
    assert model.requests[0]["messages"] == history


async def test_without_memory_the_tool_trace_a_client_sends_back_is_only_removed_from_the_history() -> None:
    traced = ('\n<details type="tool_calls" done="true" id="c1" name="fetch">\n<summary>Tool Executed</summary>\n'
              '</details>\nIt is 3.')
    history = [{"role": "user", "content": "time?"}, {"role": "assistant", "content": traced},
               {"role": "user", "content": "thanks"}]
    model = Model(["welcome"])
    await run(model, Tools(), messages=history, remember=False)
    assert model.requests[0]["messages"][1] == {"role": "assistant", "content": "It is 3."}


async def test_tool_events_come_in_order_with_the_calls_they_belong_to() -> None:
    model, tools = Model([[call("fetch", "{}", "x")]]), Tools()
    events = await run(model, tools)
    started = next(e for e in events if isinstance(e, ToolsStarted))
    ran = next(e for e in events if isinstance(e, ToolsRan))
    assert events.index(started) < events.index(ran) and started.calls == ran.calls
    assert ran.outputs[0].content == "result of {}" and ran.durations_ms[0] >= 0


async def test_calls_a_details_trace_recorded_are_given_back_to_the_model_in_order() -> None:
    shown = render_finished("details", [ToolCall("c9", "fetch", '{"page": 2}')], [Outcome("", data={"p": 2})], [3])
    assert shown is not None
    history = [{"role": "user", "content": "page two?"},
               {"role": "assistant", "content": "Looking." + shown.text + "Page two says p."},
               {"role": "user", "content": "and again?"}]
    model = Model(["ok"])
    await run(model, Tools(), messages=history)
    assert model.requests[0]["messages"][1:] == [
        {"role": "assistant", "content": "Looking.", "tool_calls": [call("fetch", '{"page": 2}', "c9")]},
        {"role": "tool", "tool_call_id": "c9", "content": '{"p":2}'},  # the value shown, as the model saw it
        {"role": "assistant", "content": "Page two says p."},
        {"role": "user", "content": "and again?"},
    ]


async def test_a_mixed_turn_traced_in_details_is_restored_once() -> None:
    # The turn called `fetch` (ours, traced in the content) and `open_page` (the client's); the client comes
    # back with its own result. Ours is restored from memory, not a second time from the trace.
    turn = [call("fetch", "{}", "ours"), call("open_page", "{}", "theirs")]
    store = MemoryStore(Bounds(max_bytes=10**7, max_age_seconds=3600))
    await run(Model([turn]), Tools([Outcome("fetched")]), client_tools=True, store=store)
    shown = render_finished("details", [ToolCall("ours", "fetch", "{}")], [Outcome("fetched", data="fetched")], [1])
    assert shown is not None
    back = [{"role": "user", "content": "go"},
            {"role": "assistant", "content": shown.text, "tool_calls": [call("open_page", "{}", "theirs")]},
            {"role": "tool", "tool_call_id": "theirs", "content": "opened"}]
    model = Model(["done"])
    await run(model, Tools(), messages=back, client_tools=True, store=store)
    sent = model.requests[0]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in sent[1]["tool_calls"]] == ["ours", "theirs"]
    assert sent[2] == {"role": "tool", "tool_call_id": "ours", "content": "fetched"}


async def test_the_users_tool_selection_reaches_the_runner() -> None:
    chosen = ToolSelection((frozenset({"fetch"}),))
    tools = Tools()
    await run(Model(["ok"]), tools, tool_selection=chosen)
    assert tools.selections == [chosen]
