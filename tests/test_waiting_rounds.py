"""The status page's verdicts on waiting rounds, fast: the list (app/ops/waiting_rounds.py) and the loop reading a
verdict written where the page writes it (app/chat/loop/asking.py, memory_restore.py), with the scripted fakes of
tests/test_loop.py over a real MemoryStore. Through HTTP, the openai SDK and a real MCP server:
tests/test_waiting_page.py."""

import time
from typing import Any

import anyio
import pytest

from app.chat.asking.approvals import DECLINED, NOT_ANSWERED
from app.chat.loop import LoopEvent, ToolsWaiting, run_tool_loop
from app.chat.memory.conversation import ConversationMemory, MemoryStores
from app.chat.memory.keys import memory_owner
from app.chat.ports import LoopOptions
from app.chat.turn import Turn
from app.openai.result_format import RenderOptions
from app.ops.waiting_rounds import WaitingCall, WaitingRounds, verdict_key
from app.state.store import MemoryStore
from tests.chat.loop.test_approvals_loop import ASK, DELETE, new_store, shown
from tests.chat.loop.test_loop import Model, Tools

CALL = [WaitingCall("delete_note", "files", '{"name": "x"}')]


def test_the_list_is_bounded_per_owner_and_scoped_to_its_owner() -> None:
    rounds = WaitingRounds(per_owner=2)
    rounds.add("turn:m", "mallory", CALL)
    for key in ("turn:a", "turn:b", "turn:c"):
        rounds.add(key, "alice", CALL)
    rounds.add("turn:c", "alice", CALL)  # a retried request: listed once
    assert [held.turn_key for held in rounds.of("alice")] == ["turn:b", "turn:c"]  # her own oldest went
    assert [held.turn_key for held in rounds.of("mallory")] == ["turn:m"]  # and no one else's
    for key in ("turn:n", "turn:o", "turn:p"):
        rounds.add(key, "mallory", CALL)
    assert [held.turn_key for held in rounds.of("alice")] == ["turn:b", "turn:c"]
    assert [held.turn_key for held in rounds.of("mallory")] == ["turn:o", "turn:p"]
    rounds.taken_up("turn:o")
    rounds.taken_up("turn:p")
    listed = rounds.of("alice")[0].shown()
    assert "turn" not in str(listed)  # the memory key never leaves the process
    assert listed["calls"] == [{"tool": "delete_note", "server": "files", "arguments": '{"name": "x"}'}]
    round_id = listed["id"]
    assert rounds.of("mallory") == [] and rounds.find(round_id, "mallory") is None
    assert rounds.find(round_id, "alice") is not None
    rounds.taken_up("turn:b")
    assert rounds.find(round_id, "alice") is None and len(rounds.of("alice")) == 1


def test_rounds_older_than_the_confirm_timeout_leave_the_list(monkeypatch: pytest.MonkeyPatch) -> None:
    rounds = WaitingRounds(max_age_seconds=60)
    rounds.add("turn:a", "", CALL)
    later = time.time() + 61
    monkeypatch.setattr(time, "time", lambda: later)
    assert rounds.of("") == []


def test_a_verdict_key_is_the_turn_keys_own() -> None:
    assert verdict_key("turn:a") != verdict_key("turn:b") and verdict_key("turn:a").startswith("verdict:")
    assert "turn:a" not in verdict_key("turn:a")


class Chat:
    """One person's chat through the loop, with the status page's list beside the store."""

    def __init__(self) -> None:
        self.store: MemoryStore = new_store()
        self.rounds = WaitingRounds()
        self.tools = Tools(confirm={"fetch"})

    async def send(self, model: Model, messages: list[dict[str, Any]]) -> list[LoopEvent]:
        stores = MemoryStores(turns=self.store, pending=self.store, waiting=self.rounds)
        memory = ConversationMemory(stores, RenderOptions(result_format="text"), owner=memory_owner("alice"))
        with anyio.fail_after(5):
            events = run_tool_loop(Turn.read({"model": "m", "messages": messages}), model, self.tools,
                                   LoopOptions(max_tool_rounds=5), memory=memory)
            return [event async for event in events]

    async def asked(self) -> list[dict[str, Any]]:
        events = await self.send(Model([[DELETE]]), [ASK])
        assert any(isinstance(e, ToolsWaiting) for e in events)
        return [ASK, {"role": "assistant", "content": shown(events)}]

    async def decide(self, verdict: bytes) -> None:
        """What POST /ui/waiting/{id} does."""
        (held,) = self.rounds.of(memory_owner("alice"))
        assert held.calls == (WaitingCall("fetch", "web", DELETE["function"]["arguments"]),)
        await self.store.put_many({verdict_key(held.turn_key): verdict}, memory_owner("alice"))


@pytest.mark.anyio
async def test_approved_on_the_page_the_next_message_runs_the_call_then_is_answered() -> None:
    chat = Chat()
    history = await chat.asked()
    await chat.decide(b"approve")
    model = Model(["Deleted, and you are welcome."])
    thanks = {"role": "user", "content": "thanks"}
    events = await chat.send(model, [*history, thanks])
    assert chat.tools.calls == [("fetch", DELETE["function"]["arguments"])]
    seen = model.requests[0]["messages"]
    assert [m["role"] for m in seen] == ["user", "assistant", "tool", "user"]
    assert seen[2]["content"].startswith("result of") and seen[3] == thanks
    assert chat.rounds.of(memory_owner("alice")) == []  # taken up

    # Later turns: the call, its real result, then the message, as the model saw them.
    later = Model(["You thanked me."])
    await chat.send(later, [*history, thanks, {"role": "assistant", "content": shown(events)},
                            {"role": "user", "content": "What happened?"}])
    again = later.requests[0]["messages"]
    assert [m["role"] for m in again] == ["user", "assistant", "tool", "user", "assistant", "user"]
    assert again[2] == seen[2] and again[3] == thanks and NOT_ANSWERED not in str(again)
    assert len(chat.tools.calls) == 1


@pytest.mark.anyio
async def test_denied_on_the_page_nothing_runs_even_after_a_yes() -> None:
    chat = Chat()
    history = await chat.asked()
    await chat.decide(b"deny")
    model = Model(["I left it."])
    await chat.send(model, [*history, {"role": "user", "content": "yes"}])
    assert chat.tools.calls == []
    seen = model.requests[0]["messages"]
    assert [m["role"] for m in seen] == ["user", "assistant", "tool"] and seen[2]["content"] == DECLINED


@pytest.mark.anyio
async def test_a_verdict_acts_once() -> None:
    chat = Chat()
    history = await chat.asked()
    await chat.decide(b"approve")
    answered = [*history, {"role": "user", "content": "thanks"}]
    await chat.send(Model(["Done."]), answered)
    retry = Model(["Done again?"])
    await chat.send(retry, answered)  # a client's retry: the round is claimed, the message answered, nothing runs
    assert len(chat.tools.calls) == 1
    assert retry.requests[0]["messages"][2]["content"] == NOT_ANSWERED


@pytest.mark.anyio
async def test_without_a_verdict_another_message_still_runs_nothing() -> None:
    chat = Chat()
    history = await chat.asked()
    model = Model(["Hello."])
    events = await chat.send(model, [*history, {"role": "user", "content": "thanks"}])
    assert chat.tools.calls == [] and model.requests[0]["messages"][2]["content"] == NOT_ANSWERED
    later = Model(["Still nothing."])
    await chat.send(later, [*history, {"role": "user", "content": "thanks"},
                            {"role": "assistant", "content": shown(events)}, {"role": "user", "content": "So?"}])
    assert later.requests[0]["messages"][2]["content"] == NOT_ANSWERED
