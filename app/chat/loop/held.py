"""A round held for the person, before its calls run: it waits for a yes (the question that ends the response,
approvals.py), or for answers to the server's questions (MCP 2026-07-28's `input_required`, questions.py); the next
request takes it up from the history before its first round: run or refuse its calls (`Held`), and what the model is
told of a call that did not run (`NotRun`). `pausing.py` is the loop's side: it ends the response and resumes.

A yes: when a round calls tools that ask first, nothing of it runs: the response ends with the question and memory
keeps the round waiting, keyed by the question as the client will send it back. The next request's history then ends
with the round's calls and the person's reply (memory/restore.py). A yes (or always) claims the round, so that it
acts once across retries and replicas, and runs its calls; a no runs those that needed no yes and tells the model the
others were declined; any other reply runs none of them and is answered as a new message. A verdict given on the
status page meanwhile decides instead of the reply: the calls run (approve) or are declined (deny), and a reply that
is not a yes or no is answered after their results. Without a waiting round, a yes or no that follows one of our
questions is told that nothing waits any more.

The server's questions: a round whose calls need input waits like a round that needs a yes: its finished calls'
results are kept with it, and the next message is the answer, never seen by the model. The answer is read against
the server's own schema; one that does not fit is asked about again, and that exchange is left out of later histories
too. An answer that fits claims the round (it acts once, on any replica: the server's state travels with it) and the
calls are sent again with it; the model sees only the calls and their final results.
"""

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from app.chat.asking import (
    DECLINED,
    NOT_ANSWERED,
    Accepted,
    Answer,
    AskedCall,
    Cancelled,
    Invalid,
    Reply,
    answer_for,
    asked_again,
    looks_like_question,
    no_longer_waiting,
    question,
    question_for,
    read_reply,
    too_late,
)
from app.chat.events import ToolsRan
from app.chat.ports import (
    ElicitAnswer,
    ImagePart,
    InputNeeded,
    RequestTools,
    RestoredHistory,
    ToolAnswers,
    ToolOutput,
    TurnMemory,
    WaitingTurn,
)
from app.openai.accumulate import ToolCall
from app.openai.schemas import content_text
from app.openai.wire import JSONValue, Message


@dataclass(frozen=True)
class NotRun:
    """The result the model is given for a call that did not run (a `ToolOutput`)."""

    content: str
    retryable: bool  # a call refused for lateness or another reply may be asked about again; a declined one not
    is_error: bool = True
    images: Sequence[ImagePart] = ()
    data: JSONValue = None
    shown: Sequence[ImagePart | str] = ()
    input_needed: None = None

    @property
    def error_message(self) -> str:
        return self.content


@dataclass(frozen=True)
class Held:
    """What the request does before its first round: run or refuse a waiting round's calls, or say that
    nothing waits any more (`notice`: then nothing else happens)."""

    calls: tuple[ToolCall, ...] = ()
    refused: dict[str, NotRun] = field(default_factory=dict)  # by call id; the others run
    reply: Message | None = None  # the person's message, answered after the calls' results
    # Decided on the status page before `reply`: the turn's stored entry holds the calls' results, which later
    # requests give the model before the reply (memory/restore.py).
    decided: bool = False
    notice: str | None = None
    remember_notice: bool = False  # the notice asks again: the next request leaves it and the reply before it out
    answers: dict[str, ToolAnswers] = field(default_factory=dict)  # by call id: sent again with the person's answers

    def to_run(self) -> list[ToolCall]:
        return [call for call in self.calls if call.id not in self.refused]

    def not_run(self) -> ToolsRan:
        refused = [call for call in self.calls if call.id in self.refused]
        return ToolsRan(refused, [self.refused[call.id] for call in refused], [0.0] * len(refused))


async def held_round(
    history: RestoredHistory, sent: Sequence[Message], memory: TurnMemory | None, confirm_timeout: float,
    server_of: Callable[[str], str | None],
) -> tuple[RestoredHistory, Held | None]:
    """The history the rounds start from, and what to do first: None when no round waited for this reply.
    `server_of`: a tool's server, named when a question is asked again."""
    waiting = history.waiting
    if waiting is None or memory is None:
        return history, _stale_answer(sent)
    reply = history.messages[-1]
    before_reply = RestoredHistory(history.messages[:-1], history.restored_results, history.turns)
    if waiting.inputs:  # the server's questions: the reply is their answer
        held = await answered(waiting, reply, memory, confirm_timeout, server_of)
        return (history if held.notice is not None else before_reply), held
    answer = read_reply(content_text(reply.get("content")))
    verdict = await memory.verdict(waiting)  # given on the status page: it decides, whatever the message says
    unanswered = Held(waiting.calls, {call.id: NotRun(NOT_ANSWERED, retryable=True) for call in waiting.calls},
                      reply=reply)
    if verdict is None and answer is Reply.OTHER:
        return before_reply, unanswered
    if not await memory.claim(waiting):
        return (before_reply, unanswered) if answer is Reply.OTHER else (history, Held(notice=no_longer_waiting()))
    decided = answer if verdict is None or (verdict is Reply.YES and answer is Reply.ALWAYS) else verdict
    refused = await _refusals(waiting, decided, memory, confirm_timeout)
    if answer is Reply.OTHER:  # decided on the page: the message is answered after the calls' results
        return before_reply, Held(waiting.calls, refused, reply=reply, decided=True)
    return before_reply, Held(waiting.calls, refused)


async def _refusals(
    waiting: WaitingTurn, answer: Reply, memory: TurnMemory, confirm_timeout: float
) -> dict[str, NotRun]:
    """The calls that do not run, and what the model is told of each."""
    asked = [call for call in waiting.calls if call.id in waiting.asks]
    if answer is Reply.NO:
        return {call.id: NotRun(DECLINED, retryable=False) for call in asked}
    if time.time() - waiting.asked_at > confirm_timeout:
        return {call.id: NotRun(too_late(confirm_timeout), retryable=True) for call in asked}
    if answer is Reply.ALWAYS:
        await memory.approve_always({call.name for call in asked})
    return {}


def _stale_answer(sent: Sequence[Message]) -> Held | None:
    """A yes or no after one of our questions with no round waiting under this key: said so, nothing run."""
    if len(sent) < 2 or sent[-1].get("role") != "user" or sent[-2].get("role") != "assistant":
        return None
    if read_reply(content_text(sent[-1].get("content"))) is Reply.OTHER:
        return None
    return Held(notice=no_longer_waiting()) if looks_like_question(content_text(sent[-2].get("content"))) else None


async def waiting_calls(calls: list[ToolCall], tools: RequestTools, memory: TurnMemory | None) -> list[ToolCall]:
    """The calls that wait for the person's yes: their tools ask first, and the person has not said "always"
    for them in this chat."""
    asking = [call for call in calls if tools.asks_first(call.name)]
    if not asking or memory is None:
        return asking
    approved = await memory.always_approved({call.name for call in asking})
    return [call for call in asking if call.name not in approved]


def asking_text(content: str, waiting: list[ToolCall], tools: RequestTools, reference: str) -> str:
    """The question, after whatever the model said in the round; `reference` names it (`new_reference`)."""
    text = question([AskedCall(call, tools.server_of(call.name)) for call in waiting], reference)
    return f"\n\n{text}" if content.strip() else text


ANSWER_CAME_TWICE = ("This answer was taken up already: the tool was sent it once. Ask again if you want it "
                     "done again.")
# Answers that do not fit are asked about again this many times; the next one gives the question up: the server
# hears "cancel", and the message is answered as a new one (it was likely not meant as an answer at all).
ASK_AGAIN_AT_MOST = 2


def needing_input(calls: Sequence[ToolCall], outputs: Sequence[ToolOutput]) -> list[tuple[ToolCall, InputNeeded]]:
    return [(call, output.input_needed) for call, output in zip(calls, outputs, strict=True)
            if output.input_needed is not None]


def questions_text(content: str, asked: list[tuple[ToolCall, InputNeeded]], tools: RequestTools,
                   reference: str) -> str:
    """The server's questions, after whatever the model said in the round; `reference` names this round."""
    parts = [question_for(params, tools.server_of(call.name)) for call, needed in asked
             for params in needed.requests.values()]
    text = "\n\n".join([*parts, f"(Question {reference}.)"])
    return f"\n\n{text}" if content.strip() else text


async def answered(waiting: WaitingTurn, reply: Message, memory: TurnMemory, confirm_timeout: float,
                   server_of: Callable[[str], str | None]) -> Held:
    """The person's reply to a round's questions: asked again when it does not fit (naming the call's server,
    as the first time; ASK_AGAIN_AT_MOST times), else the calls' answers."""
    names = {call.id: call.name for call in waiting.calls}
    results: dict[str, dict[str, ElicitAnswer]] = {}
    given_up = False
    for call_id, needed in waiting.inputs.items():
        results[call_id] = {}
        for key, params in needed.requests.items():
            answer = answer_for(content_text(reply.get("content")), params)
            if isinstance(answer, Invalid) and waiting.asked_again < ASK_AGAIN_AT_MOST:
                again = asked_again(params, server_of(names.get(call_id, "")), answer.problem)
                return Held(notice=again, remember_notice=True)
            given_up = given_up or isinstance(answer, Invalid)
            results[call_id][key] = _as_result(Cancelled() if isinstance(answer, Invalid) else answer)
    if not await memory.claim(waiting):
        return Held(notice=ANSWER_CAME_TWICE)
    calls = tuple(call for call in waiting.calls if call.id in waiting.inputs)
    if time.time() - waiting.asked_at > confirm_timeout:
        return Held(calls, {call.id: NotRun(too_late(confirm_timeout), retryable=True) for call in calls})
    answers = {call_id: ToolAnswers(results[call_id], needed.state) for call_id, needed in waiting.inputs.items()}
    return Held(calls, answers=answers, reply=reply if given_up else None)


def _as_result(answer: Answer) -> ElicitAnswer:
    """An answer as the server's ElicitResult, in JSON."""
    if isinstance(answer, Accepted):
        return {"action": "accept", "content": answer.content}
    return {"action": "cancel" if isinstance(answer, Cancelled) else "decline"}
