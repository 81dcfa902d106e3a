"""A server's questions in the loop (app/chat/loop/inputs.py, pausing.py): a call that comes back with
`input_required` ends the response with the question; the next message is the answer, read against the
server's schema, and the call is sent again with it and the server's state. Scripted fakes over a real
MemoryStore (as tests/test_approvals_loop.py); a real 2026-era server in tests/test_questions_http.py."""

from dataclasses import dataclass, field
from typing import Any

import pytest

from app.chat.loop import ToolsWaiting
from app.chat.ports import InputNeeded, ToolAnswers
from tests.chat.loop.test_approvals_loop import new_store, shown, turn
from tests.chat.loop.test_loop import Model, Outcome, Tools, call

pytestmark = pytest.mark.anyio
PARAMS = {"mode": "form", "message": "How many people, and when?",
          "requestedSchema": {"type": "object", "required": ["party_size", "time"], "properties": {
              "party_size": {"type": "integer", "minimum": 1, "maximum": 20}, "time": {"type": "string"}}}}
BOOK = call("fetch", '{"restaurant": "Luigi"}', "c1")
ASK = {"role": "user", "content": "Book a table at Luigi."}


@dataclass
class AskingTools(Tools):
    """`fetch` asks the person before it finishes, as a 2026-era server does; other tools answer at once."""

    answers: list[ToolAnswers | None] = field(default_factory=list)

    async def call_tool(self, name: str, arguments: str, on_progress: Any = None, answers: Any = None) -> Outcome:
        self.calls.append((name, arguments))
        if name != "fetch":
            return Outcome(f"result of {name}")
        self.answers.append(answers)
        if answers is None:
            return Outcome("waiting for input", input_needed=InputNeeded({"booking": PARAMS}, "sealed-1"))
        answer = answers.responses["booking"]
        return Outcome(f"booked: {answer.get('content')}" if answer["action"] == "accept" else answer["action"])


async def asked(store: Any, tools: AskingTools, calls: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    events = await turn(Model([calls or [BOOK]]), tools, store, [ASK])
    assert any(isinstance(e, ToolsWaiting) and e.for_answer for e in events)
    return [ASK, {"role": "assistant", "content": shown(events)}]


async def test_the_servers_question_ends_the_response_and_nothing_is_asked_of_the_model_again() -> None:
    store, tools = new_store(), AskingTools()
    model = Model([[BOOK]])
    events = await turn(model, tools, store, [ASK])
    text = shown(events)
    assert "How many people, and when?" in text and "party_size" in text and "(Question " in text
    assert len(model.requests) == 1 and tools.answers == [None]


async def test_the_answer_is_sent_with_the_servers_state_and_the_model_sees_only_the_result() -> None:
    store, tools = new_store(), AskingTools()
    history = await asked(store, tools)
    model = Model(["Booked for four at half past seven."])
    await turn(model, tools, store, [*history, {"role": "user", "content": "party_size: 4\ntime: 19:30"}])
    sent = tools.answers[-1]
    assert sent == ToolAnswers({"booking": {"action": "accept", "content": {"party_size": 4, "time": "19:30"}}},
                               "sealed-1")
    seen = model.requests[0]["messages"]
    assert [m["role"] for m in seen] == ["user", "assistant", "tool"]
    assert seen[-1]["content"] == "booked: {'party_size': 4, 'time': '19:30'}"
    assert "How many people" not in str(seen) and "19:30" not in seen[0]["content"]


async def test_an_answer_that_does_not_fit_is_asked_again_and_that_exchange_is_left_out_later() -> None:
    store, tools = new_store(), AskingTools()
    history = await asked(store, tools)
    model = Model(["Booked."])
    bad = [*history, {"role": "user", "content": "party_size: lots\ntime: 19:30"}]
    again = await turn(model, tools, store, bad)
    assert model.requests == [] and len(tools.answers) == 1  # nothing sent anywhere
    assert "How many people, and when?" in shown(again) and "party_size" in shown(again)
    assert "**web**" in shown(again)  # the call's server, named as the first time
    # What was wrong comes last, where a person who scrolled down to answer reads it.
    assert shown(again).endswith("**Not taken:** party_size must be a whole number. Send every line again, the right "
                                 "ones too.")
    good = [*bad, {"role": "assistant", "content": shown(again)},
            {"role": "user", "content": "party_size: 2\ntime: 8pm"}]
    await turn(model, tools, store, good)
    assert tools.answers[-1] is not None and tools.answers[-1].responses["booking"]["content"]["party_size"] == 2
    assert [m["role"] for m in model.requests[0]["messages"]] == ["user", "assistant", "tool"]


async def test_decline_and_cancel_are_the_servers_to_hear() -> None:
    for word, action in (("decline", "decline"), ("cancel", "cancel")):
        store, tools = new_store(), AskingTools()
        history = await asked(store, tools)
        model = Model(["Not booked."])
        await turn(model, tools, store, [*history, {"role": "user", "content": word}])
        assert tools.answers[-1] == ToolAnswers({"booking": {"action": action}}, "sealed-1")
        assert model.requests[0]["messages"][-1]["content"] == action


async def test_an_answer_sent_twice_reaches_the_server_once() -> None:
    store, tools = new_store(), AskingTools()
    history = await asked(store, tools)
    answer = [*history, {"role": "user", "content": "party_size: 3\ntime: noon"}]
    await turn(Model(["Booked."]), tools, store, answer)
    model = Model(["Booked again?"])
    events = await turn(model, tools, store, answer)
    assert len([a for a in tools.answers if a is not None]) == 1 and model.requests == []
    assert "taken up already" in shown(events)


async def test_later_turns_see_the_call_with_its_result_never_the_question_or_the_answer() -> None:
    store, tools = new_store(), AskingTools()
    history = await asked(store, tools, [BOOK, call("lookup", "{}", "c2")])
    answer = {"role": "user", "content": "party_size: 4\ntime: 19:30"}
    first = await turn(Model(["Booked."]), tools, store, [*history, answer])
    model = Model(["Luigi, at 19:30."])
    later = [*history, answer, {"role": "assistant", "content": shown(first)}, {"role": "user", "content": "Where?"}]
    await turn(model, tools, store, later)
    seen = model.requests[0]["messages"]
    assert [m["role"] for m in seen] == ["user", "assistant", "tool", "tool", "assistant", "user"]
    results = {m["tool_call_id"]: m["content"] for m in seen if m["role"] == "tool"}
    assert results == {"c2": "result of lookup", "c1": "booked: {'party_size': 4, 'time': '19:30'}"}
    assert "How many people" not in str(seen) and "party_size: 4" not in str(seen)


async def test_after_two_answers_that_do_not_fit_the_third_gives_the_question_up_and_is_answered() -> None:
    # "A wrong value asks again, at most a few times": then the server hears cancel, and the message, likely not
    # meant as an answer at all, goes to the model after the call's result.
    store, tools = new_store(), AskingTools()
    history = await asked(store, tools)
    model = Model(["It is sunny; the booking was not made."])
    for attempt in ("party_size: lots\ntime: 19:30", "party_size: 99\ntime: 19:30"):
        history.append({"role": "user", "content": attempt})
        again = await turn(model, tools, store, history)
        assert "party_size" in shown(again) and model.requests == []
        history.append({"role": "assistant", "content": shown(again)})
    history.append({"role": "user", "content": "What is the weather like?"})
    await turn(model, tools, store, history)
    assert tools.answers[-1] == ToolAnswers({"booking": {"action": "cancel"}}, "sealed-1")
    seen = model.requests[0]["messages"]
    assert [m["role"] for m in seen] == ["user", "assistant", "tool", "user"]
    assert seen[-2]["content"] == "cancel" and seen[-1]["content"] == "What is the weather like?"
    assert "lots" not in str(seen) and "99" not in str(seen)


CONFIRM = {"mode": "form", "message": "Luigi is full at 19:30; 21:00 instead?", "requestedSchema": {
    "type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}}


@dataclass
class TwiceAskingTools(AskingTools):
    """`fetch` asks for the booking, then, given it, asks to confirm another time before it finishes."""

    async def call_tool(self, name: str, arguments: str, on_progress: Any = None, answers: Any = None) -> Outcome:
        if name != "fetch" or answers is None or answers.state != "sealed-1":
            if name == "fetch" and answers is not None:  # the confirmation: the booking is done
                self.calls.append((name, arguments))
                self.answers.append(answers)
                return Outcome(f"booked at 21:00: {answers.responses['confirm']}")
            return await super().call_tool(name, arguments, on_progress, answers)
        self.calls.append((name, arguments))
        self.answers.append(answers)
        return Outcome("waiting for input", input_needed=InputNeeded({"confirm": CONFIRM}, "sealed-2"))


async def test_a_second_question_after_the_first_answer_is_asked_in_turn_and_its_answer_finishes_the_call() -> None:
    store, tools = new_store(), TwiceAskingTools()
    history = await asked(store, tools, [BOOK, call("lookup", "{}", "c2")])
    model = Model(["Booked at nine.", "At Luigi, at nine."])
    history.append({"role": "user", "content": "party_size: 2\ntime: 19:30"})
    second = await turn(model, tools, store, history)
    assert "21:00 instead?" in shown(second) and "**web**" in shown(second) and model.requests == []
    assert any(isinstance(e, ToolsWaiting) and e.for_answer for e in second)
    history += [{"role": "assistant", "content": shown(second)}, {"role": "user", "content": "yes"}]
    done = await turn(model, tools, store, history)
    assert tools.answers[-1] == ToolAnswers({"confirm": {"action": "accept", "content": {"ok": True}}}, "sealed-2")
    assert [m["role"] for m in model.requests[0]["messages"]] == ["user", "assistant", "tool", "tool"]
    history += [{"role": "assistant", "content": shown(done)}, {"role": "user", "content": "Where and when?"}]
    await turn(model, tools, store, history)
    seen = model.requests[1]["messages"]
    assert [m["role"] for m in seen] == ["user", "assistant", "tool", "tool", "assistant", "user"]
    results = {m["tool_call_id"]: m["content"] for m in seen if m["role"] == "tool"}
    assert results == {"c2": "result of lookup", "c1": "booked at 21:00: {'action': 'accept', 'content': {'ok': True}}"}
    assert "21:00 instead" not in str(seen) and "party_size" not in str(seen)
