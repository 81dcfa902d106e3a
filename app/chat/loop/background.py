"""Background tasks an earlier turn started (app/mcp/tasks.py), taken up at the start of the next turn.

A tool call whose MCP task outlived its request told the model so, its result marked (`TaskMark`). Memory gives
that result back with the turn; here, before the first round, each task whose last mark says it still runs is asked
about once more, as a call of the same tool with the same arguments that the gateway makes itself: its result (the
task's, once it ended; else that it still runs) ends the history the model sees, after the person's new message, as
a round of this turn, so memory keeps it and the next turn knows what the model was told. Only marks in results
memory gave back count: a client cannot make the gateway ask about a task by writing a mark into its messages.
"""

import re
import secrets
import time
from collections.abc import Sequence

import anyio

from app.chat.events import ToolsRan
from app.chat.loop.held import NotRun
from app.chat.loop.tool_runs import first_error
from app.chat.ports import TASK_ENDED, RequestTools, RestoredHistory, TaskMark, ToolAnswers, ToolOutput
from app.openai.accumulate import ToolCall
from app.openai.errors import GatewayError
from app.openai.wire import Message

MOST_FOLLOWED = 8  # tasks asked about in one turn: the latest ones
# The person's whole message asks to cancel what runs (as approvals read a reply: short, and nothing else in it).
_CANCEL = re.compile(r"^\W*(please\W+)?(cancel|stop|abort)(\W+(it|that|this|them|the\W+(\w+\W+)?tasks?))?"
                     r"(\W+please)?\W*$", re.IGNORECASE)


def tells_an_end(content: str) -> bool:
    """Whether a result says a task ended (its mark's status): what memory keeps of the rounds that ask."""
    return any(mark.status in TASK_ENDED for mark in TaskMark.found_in(content))


def asks_to_cancel(message: Message | None) -> bool:
    """Whether the person's message is "cancel it" (or "stop it", "cancel the research task", ...)."""
    content = message.get("content") if message is not None and message.get("role") == "user" else None
    return isinstance(content, str) and len(content) <= 80 and _CANCEL.match(content) is not None


def running_tasks(history: RestoredHistory) -> list[tuple[ToolCall, TaskMark]]:
    """The tasks memory's results say still run (the last mark of each), with the call that started them."""
    calls: dict[str, ToolCall] = {}
    latest: dict[tuple[str, str], tuple[ToolCall, TaskMark]] = {}
    restored = set(history.restored_results)
    for index, message in enumerate(history.messages):
        for part in message.get("tool_calls") or ():
            function = part.get("function") or {}
            calls[part.get("id", "")] = ToolCall(part.get("id", ""), function.get("name", ""),
                                                 function.get("arguments", ""))
        content = message.get("content")
        if index not in restored or not isinstance(content, str) or "[background task " not in content:
            continue
        call = calls.get(str(message.get("tool_call_id", "")))
        for mark in TaskMark.found_in(content):
            if call is not None:
                latest[mark.server, mark.task_id] = (call, mark)
    running = [(call, mark) for call, mark in latest.values() if mark.status not in TASK_ENDED]
    return running[-MOST_FOLLOWED:]


async def followed(running: Sequence[tuple[ToolCall, TaskMark]], tools: RequestTools, *, cancel: bool = False
                   ) -> tuple[list[Message], ToolsRan]:
    """The round that asks about each running task (`cancel`: has it cancelled), all at once as a round's calls are
    made (a server slow to answer holds the turn up to FOLLOW_TIMEOUT, not that for each of its tasks): the calls as
    the model would have made them, and what the servers say (each from the server the mark names, which the tool's
    name must still lead to); and the round as the trace shows it."""
    calls = [ToolCall(f"call_{secrets.token_hex(8)}", call.name, call.arguments) for call, _ in running]
    outputs: list[ToolOutput | None] = [None] * len(calls)
    durations = [0.0] * len(calls)

    async def follow(index: int, mark: TaskMark) -> None:
        call, started = calls[index], time.perf_counter()
        if tools.server_of(call.name) != mark.server:
            outputs[index] = NotRun(f"The background task {mark} was started by a tool no longer offered: its result "
                                    "cannot be asked for.", retryable=False)
        else:
            state = mark.cancel_state if cancel else mark.state
            outputs[index] = await tools.call_tool(call.name, call.arguments, answers=ToolAnswers({}, state))
        durations[index] = (time.perf_counter() - started) * 1000

    try:
        async with anyio.create_task_group() as asking:
            for index, (_, mark) in enumerate(running):
                asking.start_soon(follow, index, mark)
    except* GatewayError as stopped:  # a call that ends the request (its key was taken out): as itself
        raise first_error(stopped) from None
    asked: Message = {"role": "assistant", "content": "", "tool_calls": [c.to_message_part() for c in calls]}
    said = [output for output in outputs if output is not None]  # each call's: the group ended without an error
    results: list[Message] = [{"role": "tool", "tool_call_id": call.id, "content": output.content}
                              for call, output in zip(calls, said, strict=True)]
    return [asked, *results], ToolsRan(calls, said, durations)
