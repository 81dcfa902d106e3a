"""One round's MCP calls run at once, their progress passed on as it comes, each timed and traced; and whether
the model is shown the images they returned."""

import contextlib
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from app.chat.events import ToolProgress, ToolsRan, ToolsStarted
from app.chat.ports import LoopOptions, ProgressReport, RequestTools, ToolAnswers, ToolOutput
from app.openai.accumulate import ToolCall
from app.openai.errors import GatewayError
from app.ops.telemetry import Span, tool_failed, tool_span

PROGRESS_BUFFER = 64  # progress past this many unread notes is dropped, never waited on
PROGRESS_EVERY_SECONDS = 0.5  # a call's progress shown at most this often (its last note, progress = total, always)


async def run_tools(
    tools: RequestTools, calls: list[ToolCall], span: Span, answers: Mapping[str, ToolAnswers] | None = None,
    *, declined: Mapping[str, ToolOutput] | None = None,
) -> AsyncGenerator[ToolsStarted | ToolProgress | ToolsRan, None]:
    """Runs the calls at once, passing on their progress as it comes; ends with `ToolsRan`. A call with `answers` (by
    call id) is sent again with the person's answers to its server's questions; one `declined` has that output."""
    yield ToolsStarted(calls)
    outputs: list[ToolOutput | None] = [None] * len(calls)
    durations = [0.0] * len(calls)
    progress_in, progress_out = anyio.create_memory_object_stream[ToolProgress](PROGRESS_BUFFER)

    async def run(index: int, call: ToolCall) -> None:
        report = _thinned(call, progress_in)
        if declined and call.id in declined:
            outputs[index] = declined[call.id]
            return
        started = time.perf_counter()
        with tool_span(span, call.name, call.id) as call_span:
            output = outputs[index] = await tools.call_tool(call.name, call.arguments, report,
                                                            (answers or {}).get(call.id))
            if output.is_error:
                tool_failed(call_span, "tool_error")
        durations[index] = (time.perf_counter() - started) * 1000

    left = [len(calls)]
    try:
        async with anyio.create_task_group() as group:
            for index, call in enumerate(calls):
                group.start_soon(_last_closes, run, index, call, left, progress_in)
            if not calls:
                progress_in.close()
            async with progress_out:
                async for progress in progress_out:
                    yield progress
    except* GatewayError as stopped:  # a call that ends the request (its key was taken out): as itself, not a group
        raise first_error(stopped) from None
    yield ToolsRan(calls, [output for output in outputs if output is not None], durations)


def _thinned(call: ToolCall, progress: MemoryObjectSendStream[ToolProgress]) -> ProgressReport:
    """Where a call's progress goes: on to the stream, but a chatty server (a note per file of a crawl) would flood
    it, so one note each PROGRESS_EVERY_SECONDS, and always the last (progress = total)."""
    shown_at = [-PROGRESS_EVERY_SECONDS]

    async def report(done: float, total: float | None, message: str | None) -> None:
        now = time.monotonic()
        if now - shown_at[0] < PROGRESS_EVERY_SECONDS and (total is None or done < total):
            return
        shown_at[0] = now
        with contextlib.suppress(anyio.WouldBlock, anyio.ClosedResourceError):
            progress.send_nowait(ToolProgress(call, done, total, message))

    return report


async def _last_closes(run: Callable[[int, ToolCall], Awaitable[None]], index: int, call: ToolCall, left: list[int],
                       progress: MemoryObjectSendStream[ToolProgress]) -> None:
    """One call of a round; the last of them to end closes the progress stream, which ends the round's loop: one
    task group a round, and no task of its own to wait for the calls."""
    try:
        await run(index, call)
    finally:
        left[0] -= 1
        if not left[0]:
            progress.close()


def first_error(group: BaseExceptionGroup[GatewayError]) -> GatewayError:
    """The first of a task group's errors that end the request, raised as itself."""
    found = group.exceptions[0]
    return found if isinstance(found, GatewayError) else first_error(found)


async def sees_images(outputs: Sequence[ToolOutput], options: LoopOptions) -> bool:
    """Whether the model is shown the images the calls returned; the model is only asked when there are some."""
    if not any(output.images for output in outputs):
        return False
    return options.sees_images is not None and await options.sees_images()
