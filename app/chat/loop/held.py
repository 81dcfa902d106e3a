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

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from app.chat.asking import (
    DECLINED,
    DECLINED_IN_ADVANCE,
    NOT_ANSWERED,
    Accepted,
    Answer,
    AskedCall,
    Cancelled,
    FormAnswer,
    Invalid,
    Reply,
    answer_for,
    asked_again,
    looks_like_question,
    no_longer_waiting,
    outside,
    parsed_arguments,
    question,
    question_for,
    read_answer,
    read_reply,
    too_late,
    within,
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
class Edited:
    """A call's output after the note that the person changed its arguments (a `ToolOutput`): what the model reads,
    and what later turns restore."""

    output: ToolOutput
    note: str

    @property
    def content(self) -> str:
        return f"{self.note}\n{self.output.content}"

    @property
    def is_error(self) -> bool:
        return self.output.is_error

    @property
    def images(self) -> Sequence[ImagePart]:
        return self.output.images

    @property
    def retryable(self) -> bool:
        return self.output.retryable

    @property
    def data(self) -> JSONValue:
        return self.output.data

    @property
    def error_message(self) -> str | None:
        return self.output.error_message

    @property
    def shown(self) -> Sequence[ImagePart | str]:
        return self.output.shown

    @property
    def input_needed(self) -> InputNeeded | None:
        return self.output.input_needed


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
    edited: dict[str, Mapping[str, JSONValue]] = field(default_factory=dict)  # by call id: arguments the person changed

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
    answer = read_answer(content_text(reply.get("content")))
    verdict = await memory.verdict(waiting)  # given on the status page: it decides, whatever the message says
    unanswered = Held(waiting.calls, {call.id: NotRun(NOT_ANSWERED, retryable=True) for call in waiting.calls},
                      reply=reply)
    if verdict is None and answer is None:
        return before_reply, unanswered
    if not await memory.claim(waiting):
        return (before_reply, unanswered) if answer is None else (history, Held(notice=no_longer_waiting()))
    if verdict is None or (verdict is Reply.YES and answer is not None and answer.allow):
        decided = answer or Answer(allow=True)  # the reply's reach and changed arguments hold with the page's yes
    else:
        decided = Answer(allow=verdict is Reply.YES)
    calls, refused = await _decided(waiting, decided, memory, confirm_timeout, server_of)
    if answer is None:  # decided on the page: the message is answered after the calls' results
        return before_reply, Held(calls, refused, reply=reply, decided=True)
    edited = {call.id: decided.edits for call in calls if call.id in waiting.asks and call.id not in refused}
    return before_reply, Held(calls, refused, edited=edited if decided.edits else {})


async def _decided(
    waiting: WaitingTurn, answer: Answer, memory: TurnMemory, confirm_timeout: float,
    server_of: Callable[[str], str | None],
) -> tuple[tuple[ToolCall, ...], dict[str, NotRun]]:
    """The round's calls as they run (the asked ones with the person's changed arguments), and those that do not,
    with what the model is told of each; the answer kept as grants when it reaches beyond these calls."""
    asked = [call for call in waiting.calls if call.id in waiting.asks]
    others = [call for call in waiting.calls if call.id not in waiting.asks]
    # A call that needed no yes when the round was asked may have been refused for good since ("never").
    refused = {call_id: NotRun(DECLINED_IN_ADVANCE, retryable=False)
               for call_id, grant in (await memory.granted(others, server_of)).items() if not grant.allow}
    if not answer.allow:
        await memory.grant(answer, asked, server_of)
        return waiting.calls, refused | {call.id: NotRun(DECLINED, retryable=False) for call in asked}
    if time.time() - waiting.asked_at > confirm_timeout:
        return waiting.calls, refused | {call.id: NotRun(too_late(confirm_timeout), retryable=True) for call in asked}
    edited = {call.id: with_edits(call, answer.edits) for call in asked} if answer.edits else {}
    calls = tuple(edited.get(call.id, call) for call in waiting.calls)
    await memory.grant(answer, [edited.get(call.id, call) for call in asked], server_of)
    if answer.under is not None:  # bound: only the calls within it run now
        refused |= {call.id: NotRun(outside(answer.under), retryable=True) for call in asked
                    if not within(parsed_arguments(edited.get(call.id, call).arguments), answer.under)}
    return calls, refused


def with_edits(call: ToolCall, edits: Mapping[str, JSONValue]) -> ToolCall:
    """The call with the person's changed arguments over the model's; checked against the tool's schema when it
    runs, like any call."""
    arguments = parsed_arguments(call.arguments) or {}
    return ToolCall(call.id, call.name, json.dumps({**arguments, **edits}, ensure_ascii=False))


def _stale_answer(sent: Sequence[Message]) -> Held | None:
    """A yes or no after one of our questions with no round waiting under this key: said so, nothing run."""
    if len(sent) < 2 or sent[-1].get("role") != "user" or sent[-2].get("role") != "assistant":
        return None
    if read_reply(content_text(sent[-1].get("content"))) is Reply.OTHER:
        return None
    return Held(notice=no_longer_waiting()) if looks_like_question(content_text(sent[-2].get("content"))) else None


@dataclass(frozen=True)
class Gate:
    """A round's MCP calls before they run: those that wait for the person's yes, and those a grant refused."""

    waiting: list[ToolCall]
    declined: dict[str, NotRun]  # by call id


async def gated_calls(calls: list[ToolCall], tools: RequestTools, memory: TurnMemory | None) -> Gate:
    """The calls whose tools ask first, less those the person's grants decide: a yes runs them unasked, a no
    ("never") refuses them unasked."""
    asking = [call for call in calls if tools.asks_first(call.name)]
    if not asking or memory is None:
        return Gate(asking, {})
    # A tool whose server changed its definition since it was pinned asks whatever was granted for it.
    granted = await memory.granted([c for c in asking if tools.definition_change(c.name) is None], tools.server_of)
    return Gate([call for call in asking if call.id not in granted],
                {call_id: NotRun(DECLINED_IN_ADVANCE, retryable=False)
                 for call_id, grant in granted.items() if not grant.allow})


def asking_text(content: str, waiting: list[ToolCall], tools: RequestTools, reference: str) -> str:
    """The question, after whatever the model said in the round; `reference` names it (`new_reference`)."""
    text = question([AskedCall(call, tools.server_of(call.name), tools.definition_change(call.name))
                     for call in waiting], reference)
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


def _as_result(answer: FormAnswer) -> ElicitAnswer:
    """An answer as the server's ElicitResult, in JSON."""
    if isinstance(answer, Accepted):
        return {"action": "accept", "content": answer.content}
    return {"action": "cancel" if isinstance(answer, Cancelled) else "decline"}
