"""One round's MCP calls run at once, their progress passed on as it comes, each timed and traced."""

import contextlib
import time
from collections.abc import AsyncGenerator, Mapping

import anyio

from app.chat.events import ToolProgress, ToolsRan, ToolsStarted
from app.chat.ports import RequestTools, ToolAnswers, ToolOutput
from app.openai.accumulate import ToolCall
from app.openai.errors import GatewayError
from app.ops.telemetry import Span, tool_failed, tool_span

PROGRESS_BUFFER = 64  # progress past this many unread notes is dropped, never waited on


async def run_tools(
    tools: RequestTools, calls: list[ToolCall], span: Span, answers: Mapping[str, ToolAnswers] | None = None,
) -> AsyncGenerator[ToolsStarted | ToolProgress | ToolsRan, None]:
    """Runs the calls at once, passing on their progress as it comes; ends with `ToolsRan`. A call with
    `answers` (by call id) is sent again with the person's answers to the server's questions."""
    yield ToolsStarted(calls)
    outputs: list[ToolOutput | None] = [None] * len(calls)
    durations = [0.0] * len(calls)
    progress_in, progress_out = anyio.create_memory_object_stream[ToolProgress](PROGRESS_BUFFER)

    async def run(index: int, call: ToolCall) -> None:
        async def report(progress: float, total: float | None, message: str | None) -> None:
            with contextlib.suppress(anyio.WouldBlock, anyio.ClosedResourceError):
                progress_in.send_nowait(ToolProgress(call, progress, total, message))

        started = time.perf_counter()
        with tool_span(span, call.name, call.id) as call_span:
            output = outputs[index] = await tools.call_tool(call.name, call.arguments, report,
                                                            (answers or {}).get(call.id))
            if output.is_error:
                tool_failed(call_span, "tool_error")
        durations[index] = (time.perf_counter() - started) * 1000

    async def run_all() -> None:
        async with progress_in, anyio.create_task_group() as calls_group:
            for index, call in enumerate(calls):
                calls_group.start_soon(run, index, call)

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(run_all)
            async with progress_out:
                async for progress in progress_out:
                    yield progress
    except* GatewayError as stopped:  # a call that ends the request (its key was taken out): as itself, not a group
        raise _first(stopped) from None
    yield ToolsRan(calls, [output for output in outputs if output is not None], durations)


def _first(group: BaseExceptionGroup[GatewayError]) -> GatewayError:
    found = group.exceptions[0]
    return found if isinstance(found, GatewayError) else _first(found)
