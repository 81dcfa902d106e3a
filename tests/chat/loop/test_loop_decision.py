"""What follows a round (app/chat/loop/decision.py), one row per situation: answer, stop at the limit, ask to
answer now, run the MCP tools, hand the client its own calls. The same rules driven through the whole loop
are in test_loop.py."""

from dataclasses import dataclass, field

import pytest

from app.chat.loop.decision import (
    Action,
    CallKey,
    Decision,
    End,
    GoOn,
    Round,
    decide,
    is_last_round,
    plain_finish_reason,
    same_call,
    split_calls,
    stopped_note,
)
from app.openai.accumulate import ToolCall

FETCH = ToolCall("call_1", "fetch", '{"url": "a", "depth": 1}')
FETCH_AGAIN = ToolCall("call_2", "fetch", '{ "depth": 1,  "url": "a" }')  # the same call, spelled otherwise
FETCH_OTHER = ToolCall("call_3", "fetch", '{"url": "b"}')
OPEN_PAGE = ToolCall("call_4", "open_page", '{"page": 2}')  # the client's own tool
ANSWERED = frozenset({same_call(FETCH)})


@dataclass(frozen=True)
class Situation:
    number: int = 1
    max_rounds: int = 3
    answering_now: bool = False
    finish_reason: str | None = "stop"
    mcp: tuple[ToolCall, ...] = ()
    client: tuple[ToolCall, ...] = ()
    answered: frozenset[CallKey] = field(default_factory=frozenset)

    def round(self) -> Round:
        return Round(self.number, self.max_rounds, self.answering_now, self.finish_reason, self.mcp, self.client,
                     self.answered)


DECISIONS: list[tuple[str, Situation, Decision]] = [
    # No calls: the turn is the answer, whenever it comes.
    ("answer", Situation(), End(Action.ANSWER, "stop")),
    ("answer cut at the length limit", Situation(finish_reason="length"), End(Action.ANSWER, "length")),
    ("answer without a finish reason", Situation(finish_reason=None), End(Action.ANSWER, "stop")),
    ("answer that said tool_calls but has none", Situation(finish_reason="tool_calls"), End(Action.ANSWER, "stop")),
    ("answer in the round past the limit", Situation(number=4), End(Action.ANSWER, "stop")),
    ("answer after being asked to", Situation(answering_now=True), End(Action.ANSWER, "stop")),
    # MCP calls within the limit run.
    ("first call", Situation(mcp=(FETCH,), finish_reason="tool_calls"), GoOn(Action.RUN_TOOLS)),
    ("call in the last allowed round", Situation(number=3, mcp=(FETCH,)), GoOn(Action.RUN_TOOLS)),
    ("a new call beside an answered one", Situation(mcp=(FETCH, FETCH_OTHER), answered=ANSWERED),
     GoOn(Action.RUN_TOOLS)),
    ("a call answered before with other arguments", Situation(mcp=(FETCH_OTHER,), answered=ANSWERED),
     GoOn(Action.RUN_TOOLS)),
    # Only calls already answered: asked to answer from the results it has.
    ("a repeat", Situation(number=2, mcp=(FETCH,), answered=ANSWERED), GoOn(Action.ANSWER_NOW)),
    ("a repeat spelled otherwise", Situation(number=2, mcp=(FETCH_AGAIN,), answered=ANSWERED),
     GoOn(Action.ANSWER_NOW)),
    ("a repeat, twice", Situation(number=2, mcp=(FETCH, FETCH_AGAIN), answered=ANSWERED), GoOn(Action.ANSWER_NOW)),
    # The last request still called tools: stopped, its text (or a note) the answer.
    ("calls past the limit", Situation(number=4, mcp=(FETCH,)), End(Action.STOP, "stop")),
    ("a repeat past the limit", Situation(number=4, mcp=(FETCH,), answered=ANSWERED), End(Action.STOP, "stop")),
    ("calls after being asked to answer", Situation(number=2, answering_now=True, mcp=(FETCH_OTHER,)),
     End(Action.STOP, "stop")),
    ("no rounds allowed", Situation(max_rounds=0, mcp=(FETCH,)), End(Action.STOP, "stop")),
    # The client's own calls go back to it, ours run first, even past the limit or when ours repeat.
    ("client call", Situation(client=(OPEN_PAGE,)), End(Action.HAND_BACK, "tool_calls")),
    ("client call beside ours", Situation(mcp=(FETCH,), client=(OPEN_PAGE,)), End(Action.HAND_BACK, "tool_calls")),
    ("client call beside a repeat", Situation(mcp=(FETCH,), client=(OPEN_PAGE,), answered=ANSWERED),
     End(Action.HAND_BACK, "tool_calls")),
    ("client call past the limit", Situation(number=4, client=(OPEN_PAGE,)), End(Action.HAND_BACK, "tool_calls")),
    ("client and MCP calls past the limit", Situation(number=4, mcp=(FETCH,), client=(OPEN_PAGE,)),
     End(Action.HAND_BACK, "tool_calls")),
    ("client call after being asked to answer", Situation(answering_now=True, client=(OPEN_PAGE,)),
     End(Action.HAND_BACK, "tool_calls")),
]


@pytest.mark.parametrize(("situation", "expected"), [row[1:] for row in DECISIONS], ids=[row[0] for row in DECISIONS])
def test_what_follows_a_round(situation: Situation, expected: Decision) -> None:
    assert decide(situation.round()) == expected


@pytest.mark.parametrize(
    ("number", "max_rounds", "answering_now", "last"),
    [(1, 3, False, False), (3, 3, False, False), (4, 3, False, True), (2, 3, True, True), (1, 0, False, True)],
)
def test_the_last_request_is_past_the_limit_or_asked_to_answer(
    number: int, max_rounds: int, answering_now: bool, last: bool
) -> None:
    assert is_last_round(number, max_rounds, answering_now) is last


def test_calls_split_into_ours_and_the_clients_with_unknown_names_ours() -> None:
    unknown = ToolCall("call_5", "no_such_tool", "{}")
    calls = [OPEN_PAGE, FETCH, unknown, ToolCall("call_6", "open_page", "{}")]
    mcp, client = split_calls(calls, {"open_page"})
    assert mcp == [FETCH, unknown]
    assert client == [OPEN_PAGE, calls[3]]


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        ('{"a": 1, "b": 2}', '{"b":2,"a":1}', True),
        ("", "{}", True),
        ("not json ", " not json", True),
        ('{"a": 1}', '{"a": 2}', False),
    ],
)
def test_a_repeat_is_seen_through_key_order_and_spaces(first: str, second: str, same: bool) -> None:
    assert (same_call(ToolCall("1", "fetch", first)) == same_call(ToolCall("2", "fetch", second))) is same
    assert same_call(ToolCall("1", "fetch", first)) != same_call(ToolCall("2", "read", first))


@pytest.mark.parametrize(
    ("reason", "plain"),
    [(None, "stop"), ("tool_calls", "stop"), ("tool", "stop"), ("function_call", "stop"), ("length", "length"),
     ("stop", "stop"), ("content_filter", "content_filter")],
)
def test_an_answer_without_calls_never_says_it_has_some(reason: str | None, plain: str) -> None:
    assert plain_finish_reason(reason) == plain


def test_the_stopped_note_names_the_limit() -> None:
    assert stopped_note(5) == "(Stopped: the model kept calling tools after 5 rounds.)"
