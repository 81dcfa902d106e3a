"""What to do after a round, decided from what the round produced and where the loop stands. Pure: no I/O,
no awaits, so every rule is a row of a table test (tests/chat/loop/test_loop_decision.py)."""

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Literal

from app.openai.accumulate import ToolCall

CallKey = tuple[str, str]  # a call's name and arguments in one spelling


class Action(Enum):
    ANSWER = "answer"  # no calls: the turn is the answer
    STOP = "stop"  # the last request still called tools: its text, or a note saying so, is the answer
    ANSWER_NOW = "answer_now"  # nothing new asked for: ask again with the tools kept but not callable
    RUN_TOOLS = "run_tools"  # run the MCP calls and feed their results back
    HAND_BACK = "hand_back"  # run the MCP calls if any, then hand the client its own calls
    ASK = "ask"  # some calls wait for the person's yes: ask, and end the response; nothing runs


@dataclass(frozen=True)
class Round:
    """What one round produced, and where the loop stood when it asked."""

    number: int  # from 1
    max_rounds: int
    answering_now: bool  # the request was sent with tool_choice "none" because the model repeated itself
    finish_reason: str | None  # the upstream's
    mcp_calls: Sequence[ToolCall]  # calls not for the client's tools, including names nobody owns
    client_calls: Sequence[ToolCall]
    answered: Collection[CallKey]  # calls already run whose result another try would not change
    waiting: Sequence[ToolCall] = ()  # MCP calls that wait for the person's yes (approvals.py)


@dataclass(frozen=True)
class GoOn:
    """Another round follows."""

    action: Literal[Action.ANSWER_NOW, Action.RUN_TOOLS]


@dataclass(frozen=True)
class End:
    """The request ends with this round."""

    action: Literal[Action.ANSWER, Action.STOP, Action.HAND_BACK, Action.ASK]
    finish_reason: str  # what the answer's `Finished` says


Decision = GoOn | End


def is_last_round(number: int, max_rounds: int, answering_now: bool) -> bool:
    """Whether this round's request is the last: past the limit, or asked to answer from what it has."""
    return number > max_rounds or answering_now


def decide(done: Round) -> Decision:
    """The next step after `done`."""
    if not done.mcp_calls and not done.client_calls:
        return End(Action.ANSWER, plain_finish_reason(done.finish_reason))
    # Nothing answered yet (every first round): no call can repeat one, and none need be spelled out to tell.
    repeated = all(same_call(call) in done.answered for call in done.mcp_calls) if done.answered else not done.mcp_calls
    if done.waiting and not repeated:
        # Before anything runs, even at the limit: the person answers, and the next request goes on from there.
        return End(Action.ASK, "stop")
    if done.client_calls:
        # Ours run even in the last round: the client gets its own and comes back with their results.
        return End(Action.HAND_BACK, "tool_calls")
    if is_last_round(done.number, done.max_rounds, done.answering_now):
        return End(Action.STOP, "stop")
    if repeated:
        # Small models repeat a call they already have the result of, round after round. Running it again
        # would tell them nothing new: they are asked to answer from the results they have.
        return GoOn(Action.ANSWER_NOW)
    return GoOn(Action.RUN_TOOLS)


def split_calls(calls: Sequence[ToolCall], client_tool_names: Collection[str]) -> tuple[list[ToolCall], list[ToolCall]]:
    """The MCP calls and the client's. A name neither side owns is a model's slip: it goes with the MCP
    calls, whose runner answers it with an error the model can fix."""
    return [c for c in calls if c.name not in client_tool_names], [c for c in calls if c.name in client_tool_names]


def same_call(call: ToolCall) -> CallKey:
    """The call's name and arguments in one spelling, so that key order and spaces do not hide a repeat."""
    try:
        return call.name, json.dumps(json.loads(call.arguments or "{}"), sort_keys=True)
    except ValueError:
        return call.name, call.arguments.strip()


def stopped_note(max_rounds: int) -> str:
    """The answer when the last request still called tools and said nothing."""
    return f"(Stopped: the model kept calling tools after {max_rounds} rounds.)"


def plain_finish_reason(reason: str | None) -> str:
    # "tool_calls"/"tool" without any call left (e.g. empty names) would make clients wait for calls.
    if reason in (None, "tool_calls", "tool", "function_call"):
        return "stop"
    return reason
