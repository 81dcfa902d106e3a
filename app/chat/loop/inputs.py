"""Calls that came back with the server's questions (MCP 2026-07-28's `input_required`): the question that ends
the response, the person's reply read as their answer, and the answers the calls are sent with again.

A round whose calls need input waits like a round that needs a yes (asking.py): its finished calls' results are
kept with it, and the next message is the answer, never seen by the model. The answer is read against the
server's own schema (questions.py); one that does not fit is asked about again, and that exchange is left out
of later histories too. An answer that fits claims the round (it acts once, on any replica: the server's state
travels with it) and the calls are sent again with it; the model sees only the calls and their final results.
"""

import time
from collections.abc import Callable, Sequence

from app.chat.asking import Accepted, Answer, Cancelled, Invalid, answer_for, asked_again, question_for, too_late
from app.chat.loop.held import Held, NotRun
from app.chat.ports import ElicitAnswer, InputNeeded, RequestTools, ToolAnswers, ToolOutput, TurnMemory, WaitingTurn
from app.openai.accumulate import ToolCall
from app.openai.schemas import content_text
from app.openai.wire import Message

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
