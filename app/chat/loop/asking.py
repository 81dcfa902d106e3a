"""A round held for the person's yes: the question that ends the response, and the next request resuming it.

When a round calls tools that ask first, nothing of it runs: the response ends with the question
(approvals.py) and memory keeps the round waiting, keyed by the question as the client will send it back.
The next request's history then ends with the round's calls and the person's reply (memory_restore.py). A yes
(or always) claims the round, so that it acts once across retries and replicas, and runs its calls; a no runs
those that needed no yes and tells the model the others were declined; any other reply runs none of them and
is answered as a new message. A verdict given on the status page meanwhile decides instead of the reply: the
calls run (approve) or are declined (deny), and a reply that is not a yes or no is answered after their
results. Without a waiting round, a yes or no that follows one of our questions is told
that nothing waits any more.
"""

import time
from collections.abc import Callable, Sequence

from app.chat.asking import (
    DECLINED,
    NOT_ANSWERED,
    AskedCall,
    Reply,
    looks_like_question,
    no_longer_waiting,
    question,
    read_reply,
    too_late,
)
from app.chat.loop.held import Held, NotRun
from app.chat.loop.inputs import answered
from app.chat.ports import RequestTools, RestoredHistory, TurnMemory, WaitingTurn
from app.openai.accumulate import ToolCall
from app.openai.schemas import content_text
from app.openai.wire import Message


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
