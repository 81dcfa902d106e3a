"""The loop asks the person (app/chat/loop/asking.py): a call whose tool asks first does not run; the response
ends with the question; the next request's reply decides. Driven by the scripted fakes of tests/test_loop.py
over a real MemoryStore, so every rule runs in milliseconds; through HTTP, real MCP servers and the openai SDK
in tests/test_approvals.py."""

import time
from typing import Any

import anyio
import pytest

from app.chat.asking import DECLINED, DECLINED_IN_ADVANCE, NOT_ANSWERED, NOT_KEPT, Reply, Scope, read_reply
from app.chat.loop import Finished, LoopEvent, ToolsRan, ToolsWaiting, run_tool_loop
from app.chat.memory import GrantBook
from app.chat.memory.conversation import ConversationMemory, MemoryStores
from app.chat.memory.keys import memory_owner
from app.chat.ports import LoopOptions
from app.chat.turn import Turn
from app.openai.accumulate import ToolCall
from app.openai.markup import TextDelta
from app.openai.result_format import RenderOptions
from app.state.store import Bounds, MemoryStore
from tests.chat.loop.test_loop import Model, Tools, call

pytestmark = pytest.mark.anyio
ASK = {"role": "user", "content": "Delete the page about cats."}
DELETE = call("fetch", '{"url": "https://example.com/cats", "method": "DELETE"}', "c1")
DELETE_CALL = ToolCall("c1", "fetch", DELETE["function"]["arguments"])


class Clock:
    """The grants' clock, moved by hand: a grant "for 1 hour" is tried at its last second and its first after."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


BOOKS: dict[int, GrantBook] = {}  # each test's grants, by its store
CLOCKS: dict[int, Clock] = {}


def new_store() -> MemoryStore:
    store = MemoryStore(Bounds(max_bytes=10**7, max_age_seconds=3600))
    CLOCKS[id(store)] = clock = Clock()
    BOOKS[id(store)] = GrantBook.in_memory(clock)
    return store


async def turn(
    model: Model, tools: Tools, store: MemoryStore, messages: list[dict[str, Any]], *, key: str = "alice",
    chat_id: str | None = None, **options: Any,
) -> list[LoopEvent]:
    stores = MemoryStores(turns=store, pending=store, grants=BOOKS.get(id(store)))
    memory = ConversationMemory(stores, RenderOptions(result_format="text"), chat_id=chat_id, owner=memory_owner(key))
    body = {"model": "m", "messages": messages}
    with anyio.fail_after(5):
        events = run_tool_loop(Turn.read(body), model, tools, LoopOptions(**({"max_tool_rounds": 5} | options)),
                               memory=memory)
        return [event async for event in events]


def shown(events: list[LoopEvent]) -> str:
    return "".join(e.content for e in events if isinstance(e, TextDelta))


def finished(events: list[LoopEvent]) -> Finished:
    last = events[-1]
    assert isinstance(last, Finished)
    return last


async def asked(store: MemoryStore, tools: Tools | None = None) -> tuple[list[dict[str, Any]], Tools]:
    """The first request: the model calls `fetch`, which asks first. The history as the client keeps it."""
    tools = tools or Tools(confirm={"fetch"})
    events = await turn(Model([[DELETE]]), tools, store, [ASK])
    return [ASK, {"role": "assistant", "content": shown(events)}], tools


async def test_a_call_that_asks_first_does_not_run_and_the_response_asks_the_person() -> None:
    store = new_store()
    tools = Tools(confirm={"fetch"})
    events = await turn(Model([[DELETE]]), tools, store, [ASK])
    assert tools.calls == []
    assert finished(events).finish_reason == "stop"
    question = shown(events)
    assert "**fetch** on the server **web**" in question and '"https://example.com/cats"' in question
    assert "Reply **yes** to run it or **no** to refuse. Beyond this call: **yes for this chat**" in question
    assert "**always** or **never** for fetch" in question and "**yes, but name=value**" in question
    assert [e.calls for e in events if isinstance(e, ToolsWaiting)] == [[DELETE_CALL]]


async def test_yes_runs_the_call_and_the_model_sees_only_the_call_and_its_result() -> None:
    store = new_store()
    history, tools = await asked(store)
    model = Model(["Deleted."])
    events = await turn(model, tools, store, [*history, {"role": "user", "content": "Yes!"}])
    assert tools.calls == [("fetch", DELETE["function"]["arguments"])]
    assert shown(events) == "Deleted. "
    seen = model.requests[0]["messages"]
    assert [m["role"] for m in seen] == ["user", "assistant", "tool"]
    assert seen[1]["tool_calls"][0]["id"] == "c1" and seen[2]["tool_call_id"] == "c1"
    assert "approval" not in str(seen) and "Yes" not in str(seen)


async def test_no_runs_nothing_and_the_model_is_told_the_person_declined() -> None:
    store = new_store()
    history, tools = await asked(store)
    model = Model(["Fine, I left it."])
    events = await turn(model, tools, store, [*history, {"role": "user", "content": "no"}])
    assert tools.calls == []
    assert model.requests[0]["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": DECLINED}
    ran = [e for e in events if isinstance(e, ToolsRan)]
    assert ran and ran[0].outputs[0].is_error  # the trace shows the call, refused


async def test_another_reply_runs_nothing_and_is_answered_as_a_new_message() -> None:
    store = new_store()
    history, tools = await asked(store)
    model = Model(["It is sunny."])
    reply = {"role": "user", "content": "Wait, what is the weather like first?"}
    await turn(model, tools, store, [*history, reply])
    assert tools.calls == []
    seen = model.requests[0]["messages"]
    assert [m["role"] for m in seen] == ["user", "assistant", "tool", "user"]
    assert seen[2]["content"] == NOT_ANSWERED and seen[3] == reply


async def test_a_yes_sent_twice_runs_the_call_once() -> None:
    store = new_store()
    history, tools = await asked(store)
    answer = [*history, {"role": "user", "content": "yes"}]
    await turn(Model(["Deleted."]), tools, store, answer)
    model = Model(["Deleted again?"])
    events = await turn(model, tools, store, answer)  # a client's retry, or a replay
    assert len(tools.calls) == 1
    assert model.requests == [] and "Nothing was run" in shown(events)


async def test_a_yes_under_another_key_finds_nothing_waiting_and_runs_nothing() -> None:
    store = new_store()
    history, tools = await asked(store)
    model = Model(["Deleted."])
    events = await turn(model, tools, store, [*history, {"role": "user", "content": "yes"}], key="mallory")
    assert tools.calls == [] and model.requests == []
    assert "asked under another API key" in shown(events)


async def test_a_yes_past_the_timeout_does_not_run_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    store = new_store()
    history, tools = await asked(store)
    later = time.time() + 120
    monkeypatch.setattr(time, "time", lambda: later)
    model = Model(["Too late, I will ask again."])
    await turn(model, tools, store, [*history, {"role": "user", "content": "yes"}], confirm_timeout=60)
    assert tools.calls == []
    assert "came after the 1 minutes" in model.requests[0]["messages"][-1]["content"]


AGAIN = call("fetch", '{"url": "https://example.com/dogs", "method": "DELETE"}', "c2")
DOGS = {"role": "user", "content": "Delete the dogs page."}


async def granted(store: MemoryStore, reply: str, **kwargs: Any) -> tuple[list[dict[str, Any]], Tools]:
    """The first call asked about and answered with `reply` (it runs); the history going on with a second request."""
    history, tools = await asked(store)
    first = await turn(Model(["Deleted."]), tools, store, [*history, {"role": "user", "content": reply}], **kwargs)
    assert tools.calls == [("fetch", DELETE["function"]["arguments"])]
    return [*history, {"role": "user", "content": reply}, {"role": "assistant", "content": shown(first)},
            {"role": "user", "content": "And the dogs page."}], tools


def asks(events: list[LoopEvent]) -> bool:
    return any(isinstance(e, ToolsWaiting) for e in events)


async def test_yes_for_this_chat_runs_it_and_stops_asking_for_that_tool_in_this_chat() -> None:
    store = new_store()
    later, tools = await granted(store, "yes for this chat")
    events = await turn(Model([[AGAIN], "Deleted that too."]), tools, store, later)
    assert [name for name, _ in tools.calls] == ["fetch", "fetch"]
    assert not asks(events)
    assert asks(await turn(Model([[AGAIN]]), tools, store, [DOGS]))  # "for this chat" is for that chat only


async def test_always_holds_for_the_key_in_every_chat_until_revoked_and_not_for_another_key() -> None:
    store = new_store()
    later, tools = await granted(store, "always")
    assert not asks(await turn(Model([[AGAIN], "Done."]), tools, store, later))
    assert not asks(await turn(Model([[AGAIN], "Done."]), tools, store, [DOGS]))  # another chat, the same key
    assert asks(await turn(Model([[AGAIN]]), tools, store, [DOGS], key="bob"))
    assert len(tools.calls) == 3
    book = BOOKS[id(store)]
    [grant] = await book.of(memory_owner("alice"))
    assert (grant.server, grant.tool, grant.scope, grant.allow) == ("web", "fetch", Scope.ALWAYS, True)
    assert await book.revoke(memory_owner("bob"), grant.id) is None  # another key's grant is not found
    assert await book.revoke(memory_owner("alice"), grant.id) == grant
    assert asks(await turn(Model([[AGAIN]]), tools, store, [DOGS]))


async def test_yes_for_an_hour_holds_exactly_an_hour() -> None:
    store = new_store()
    _, tools = await granted(store, "yes for 1 hour")
    clock = CLOCKS[id(store)]
    clock.now += 3599
    assert not asks(await turn(Model([[AGAIN], "Done."]), tools, store, [DOGS]))
    clock.now += 1
    assert asks(await turn(Model([[AGAIN]]), tools, store, [DOGS]))
    assert len(tools.calls) == 2


async def test_never_refuses_every_later_call_unasked_and_never_for_this_chat_only_in_it() -> None:
    store = new_store()
    history, tools = await asked(store)
    model = Model(["Not deleted."])
    await turn(model, tools, store, [*history, {"role": "user", "content": "never for this chat"}])
    later = [*history, {"role": "user", "content": "never for this chat"}, {"role": "assistant", "content": "x"},
             {"role": "user", "content": "Try the dogs page."}]
    model = Model([[AGAIN], "It was refused."])
    events = await turn(model, tools, store, later)
    assert tools.calls == [] and not asks(events)
    assert model.requests[1]["messages"][-1]["content"] == DECLINED_IN_ADVANCE
    assert asks(await turn(Model([[AGAIN]]), tools, store, [DOGS]))  # another chat is asked
    history, _ = await asked(store, tools)
    await turn(Model(["No."]), tools, store, [*history, {"role": "user", "content": "never"}])
    assert not asks(await turn(Model([[AGAIN], "Refused."]), tools, store, [DOGS]))
    assert tools.calls == []


async def test_a_bound_grant_runs_calls_within_its_path_and_asks_again_outside_it() -> None:
    store = new_store()
    tools = Tools(confirm={"write"})
    inside = call("write", '{"path": "/home/me/notes/a.md"}', "c1")
    events = await turn(Model([[inside]]), tools, store, [ASK])
    history = [ASK, {"role": "assistant", "content": shown(events)},
               {"role": "user", "content": "always for files under /home/me/notes"}]
    await turn(Model(["Written."]), tools, store, history)
    also_inside = call("write", '{"path": "/home/me/notes/sub/b.md"}', "c2")
    outside = call("write", '{"path": "/home/me/notes/../.ssh/config"}', "c3")
    assert not asks(await turn(Model([[also_inside], "Done."]), tools, store, [ASK]))
    assert asks(await turn(Model([[outside]]), tools, store, [ASK]))
    assert [arguments for _, arguments in tools.calls] == ['{"path": "/home/me/notes/a.md"}',
                                                          '{"path": "/home/me/notes/sub/b.md"}']


async def test_a_yes_bound_to_a_path_the_call_is_outside_of_does_not_run_it() -> None:
    store = new_store()
    history, tools = await asked(store)
    model = Model(["Not there."])
    await turn(model, tools, store, [*history, {"role": "user", "content": "yes for files under /srv"}])
    assert tools.calls == []
    assert model.requests[0]["messages"][-1]["content"].startswith("Not run: the person approved only calls for "
                                                                    "paths under /srv")


async def test_yes_but_runs_the_call_with_the_changed_arguments_and_the_model_sees_them() -> None:
    store = new_store()
    history, tools = await asked(store)
    model = Model(["Deleted the birds page."])
    events = await turn(model, tools, store, [*history, {"role": "user", "content": "yes, but url=https://example.com/birds"}])
    edited = '{"url": "https://example.com/birds", "method": "DELETE"}'
    assert tools.calls == [("fetch", edited)]
    ran = next(e for e in events if isinstance(e, ToolsRan))
    assert ran.calls[0].arguments == edited  # the trace shows what ran
    seen = model.requests[0]["messages"]
    assert seen[-2]["tool_calls"][0]["function"]["arguments"] == edited
    assert seen[-1]["content"].startswith('(The person changed the arguments before approving this call: '
                                          'url="https://example.com/birds".)\nresult of')


async def test_with_open_webuis_chat_id_yes_for_this_chat_holds_in_the_whole_chat() -> None:
    store = new_store()
    tools = Tools(confirm={"fetch"})
    question = shown(await turn(Model([[DELETE]]), tools, store, [ASK], chat_id="chat-1"))
    answered = [ASK, {"role": "assistant", "content": question}, {"role": "user", "content": "yes for this chat"}]
    await turn(Model(["Deleted."]), tools, store, answered, chat_id="chat-1")
    branch = [ASK, {"role": "assistant", "content": "(regenerated)"}, {"role": "user", "content": "Dogs too."}]
    in_the_chat = await turn(Model([[AGAIN], "Done."]), tools, store, branch, chat_id="chat-1")
    another_chat = await turn(Model([[AGAIN]]), tools, store, [ASK], chat_id="chat-2")
    assert not asks(in_the_chat)
    assert asks(another_chat)


async def test_yes_for_this_chat_holds_only_while_the_history_carries_the_exchange_that_granted_it() -> None:
    store = new_store()
    history, tools = await asked(store)
    for_the_chat = [*history, {"role": "user", "content": "yes for this chat"}]
    first = await turn(Model(["Deleted."]), tools, store, for_the_chat)
    going_on = [*for_the_chat, {"role": "assistant", "content": shown(first)}, {"role": "user", "content": "Dogs too."}]
    assert not asks(await turn(Model([[AGAIN], "Done."]), tools, store, going_on))
    same_opening = await turn(Model([[AGAIN]]), tools, store, [ASK])  # a new chat, word for word chat 1's start
    edited = [*history, {"role": "user", "content": "yes"}, *going_on[3:]]  # the grant edited away
    assert asks(same_opening)
    assert asks(await turn(Model([[AGAIN]]), tools, store, edited))
    assert [name for name, _ in tools.calls] == ["fetch", "fetch"]


async def test_later_turns_see_the_approved_call_and_its_result_never_the_question() -> None:
    store = new_store()
    history, tools = await asked(store)
    answer = await turn(Model(["Deleted."]), tools, store, [*history, {"role": "user", "content": "ok"}])
    model = Model(["You asked me to delete it."])
    later = [*history, {"role": "user", "content": "ok"}, {"role": "assistant", "content": shown(answer)},
             {"role": "user", "content": "What did you do?"}]
    await turn(model, tools, store, later)
    seen = model.requests[0]["messages"]
    assert [m["role"] for m in seen] == ["user", "assistant", "tool", "assistant", "user"]
    assert seen[2]["content"].startswith("result of") and seen[3]["content"] == "Deleted. "
    assert "approval" not in str(seen)


async def test_a_decided_turn_whose_answer_was_not_kept_still_gets_results_for_its_calls() -> None:
    store = new_store()
    history, tools = await asked(store)
    model = Model(["Hello."])
    later = [*history, {"role": "user", "content": "yes"}, {"role": "assistant", "content": "Done (not stored)."},
             {"role": "user", "content": "Thanks"}]
    await turn(model, tools, store, later)
    seen = model.requests[0]["messages"]
    assert [m["role"] for m in seen] == ["user", "assistant", "tool", "assistant", "user"]
    assert seen[2]["content"] == NOT_KEPT


async def test_no_runs_the_calls_that_needed_no_yes() -> None:
    store = new_store()
    tools = Tools(confirm={"fetch"})
    both = [DELETE, call("lookup", "{}", "c2")]  # `lookup` asks nobody (nor does any server own it)
    events = await turn(Model([both]), tools, store, [ASK])
    history = [ASK, {"role": "assistant", "content": shown(events)}]
    model = Model(["Only looked."])
    await turn(model, tools, store, [*history, {"role": "user", "content": "no"}])
    assert tools.calls == [("lookup", "{}")]
    results = {m["tool_call_id"]: m["content"] for m in model.requests[0]["messages"] if m["role"] == "tool"}
    assert results == {"c1": DECLINED, "c2": "result of {}"}


async def test_without_asking_tools_nothing_changes() -> None:
    tools = Tools()
    model = Model([[DELETE], "Deleted."])
    events = await turn(model, tools, new_store(), [ASK])
    assert len(tools.calls) == 1 and shown(events) == "Deleted. "


@pytest.mark.parametrize(("reply", "expected"), [
    ("yes", Reply.YES), ("Yes!", Reply.YES), ("  OK. ", Reply.YES), ("go ahead", Reply.YES),
    ("always", Reply.ALWAYS), ("Always allow", Reply.ALWAYS), ("yes for this chat", Reply.ALWAYS),
    ("yes for 2 hours", Reply.ALWAYS), ("never", Reply.NO), ("never for this chat", Reply.NO),
    ("no", Reply.NO), ("No.", Reply.NO), ("don't", Reply.NO), ("cancel", Reply.NO),
    ("yes, but first tell me what it does", Reply.OTHER), ("What is the weather?", Reply.OTHER), ("", Reply.OTHER),
    ("yes " * 30, Reply.OTHER),
])
def test_a_reply_is_read_as_yes_always_no_or_something_else(reply: str, expected: Reply) -> None:
    assert read_reply(reply) is expected


async def test_two_chats_alike_word_for_word_each_ask_and_each_yes_runs_its_call() -> None:
    store = new_store()
    tools = Tools(confirm={"fetch"})
    for _ in range(2):
        history, _ = await asked(store, tools)
        await turn(Model(["Deleted."]), tools, store, [*history, {"role": "user", "content": "yes"}])
    assert len(tools.calls) == 2


async def test_a_tool_whose_definition_changed_asks_whatever_was_granted_and_shows_the_diff() -> None:
    store = new_store()
    later, tools = await granted(store, "always")
    tools.changed["fetch"] = ('--- pinned\n+++ now\n-  "description": "Fetch a page."\n'
                              '+  "description": "Fetch, and mail it."')
    events = await turn(Model([[AGAIN]]), tools, store, later)
    assert asks(events) and len(tools.calls) == 1
    question = shown(events)
    assert "**The server changed this tool's definition** since it was first trusted" in question
    assert '    +  "description": "Fetch, and mail it."' in question
    del tools.changed["fetch"]  # accepted: the grant holds again
    assert not asks(await turn(Model([[AGAIN], "Done."]), tools, store, later))
