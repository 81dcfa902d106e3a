"""The tool loop: ask the upstream, run the MCP tools it calls, feed the results back, until it answers.

Written against the Protocols of `ports.py` (an upstream that streams chunks, a runner that owns tools),
so it imports no web framework and no SDK. It yields events; `streaming.py` turns them into what the
client receives. For a streaming client every round is streamed from the upstream: content is relayed
as it arrives and tool-call deltas are folded, never passed on, unless they call the client's own
tools. For a non-streaming client each round is one whole upstream answer, folded the same way.
"""

import contextlib
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import Any

import anyio

from app.chat.context_budget import prompt_allowance
from app.chat.ports import (
    ChatUpstream,
    ImagePart,
    LoopOptions,
    RequestStats,
    RequestTools,
    RestoredHistory,
    ToolOutput,
    ToolRunner,
    TurnMemory,
)
from app.chat.trace import strip_trace
from app.openai.accumulate import ToolCall, TurnAccumulator, Usage
from app.openai.markup import TextDelta
from app.openai.schemas import image_part
from app.ops.telemetry import Span, end_chat_span, start_chat_span, tool_failed, tool_span


@dataclass(frozen=True)
class Started:
    """The upstream accepted the first request: the response can be committed to a 200."""


@dataclass(frozen=True)
class ToolsStarted:
    calls: list[ToolCall]


@dataclass(frozen=True)
class ToolProgress:
    call: ToolCall
    progress: float
    total: float | None
    message: str | None


@dataclass(frozen=True)
class ToolsRan:
    calls: list[ToolCall]
    outputs: list[ToolOutput]
    durations_ms: list[float]


@dataclass(frozen=True)
class Finished:
    finish_reason: str
    usage: Usage | None
    client_tool_calls: list[ToolCall] = field(default_factory=list)


LoopEvent = Started | TextDelta | ToolsStarted | ToolProgress | ToolsRan | Finished
PROGRESS_BUFFER = 64  # progress past this many unread notes is dropped, never waited on


async def run_tool_loop(
    body: dict[str, Any],
    upstream: ChatUpstream,
    tools: ToolRunner,
    options: LoopOptions,
    *,
    stats: RequestStats | None = None,
    memory: TurnMemory | None = None,
) -> AsyncGenerator[LoopEvent, None]:
    """Runs one chat completion with MCP tools to its end, yielding what the client should learn.

    Raises:
        GatewayError: from the upstream; before `Started` when the first request fails.
    """
    stats = stats if stats is not None else RequestStats()
    client_tool_names = _tool_names(body.get("tools") or [])
    mcp_tools = tools.tools_for_request(offered=options.offer_tools, client_tools=frozenset(client_tool_names),
                                        selection=options.tool_selection)
    history = (await memory.restore(body["messages"], options.context_tokens) if memory is not None
               else _without_traces(body["messages"]))
    stats.restored_turns = history.turns
    if options.prompt_messages:  # after the memory read the history as the client keeps it
        history = replace(history, messages=[*history.messages[:-1], *options.prompt_messages])
    mcp_tools, client_tools = await _within_budget(history.messages, mcp_tools, body.get("tools") or [], options,
                                                   stats)
    request = _first_request(body, mcp_tools.openai_tools, client_tool_names, client_tools)
    # A withheld client tool the model calls anyway still goes back to the client.
    offered_names = client_tool_names | {tool["function"]["name"] for tool in mcp_tools.openai_tools}
    messages = await _first_messages(body, request, history, mcp_tools, options, memory)
    first_count = len(messages)
    shown: list[str] = []  # the text the client is shown, which it sends back next time
    span = start_chat_span(body.get("model"), bool(body.get("stream")))
    finished: Finished | None = None
    failure: BaseException | None = None
    answered: set[tuple[str, str]] = set()  # calls already run whose result another try would not change
    answer_now = False
    try:
        for round_number in range(1, options.max_tool_rounds + 2):
            last_round = round_number > options.max_tool_rounds or answer_now
            if last_round and request.get("tools"):
                # Keep the tools so the model still understands the history; only forbid calling them.
                request["tool_choice"] = "none"
            turn = TurnAccumulator(offered_names)
            async for event in _ask(upstream, {**request, "messages": messages}, turn, first=round_number == 1):
                if isinstance(event, TextDelta):
                    shown.append(event.content)
                yield event
            _count(stats, round_number, turn)

            calls = turn.tool_calls()
            # A name neither side owns is a model's slip: the runner answers it with an error it can fix.
            client_calls = [c for c in calls if c.name in client_tool_names]
            mcp_calls = [c for c in calls if c.name not in client_tool_names]
            if not calls:
                if memory is not None:
                    await memory.remember_turn(_rounds(messages[first_count:]), turn.content, "".join(shown),
                                               options.prompt_messages)
                yield (finished := Finished(_plain_finish_reason(turn.finish_reason), stats.usage))
                return
            if last_round and not client_calls:
                final = turn.content
                if not final:
                    final = f"(Stopped: the model kept calling tools after {options.max_tool_rounds} rounds.)"
                    shown.append(final)
                    yield TextDelta(final)
                if memory is not None:
                    await memory.remember_turn(_rounds(messages[first_count:]), final, "".join(shown),
                                               options.prompt_messages)
                yield (finished := Finished("stop", stats.usage))
                return
            if not client_calls and all(_same_call(call) in answered for call in mcp_calls):
                # Small models repeat a call they already have the result of, round after round. Running it
                # again would tell them nothing new: they are asked to answer from the results they have.
                answer_now = True
                continue

            outputs: list[ToolOutput] = []
            if mcp_calls:
                async with aclosing(_run_tools(mcp_tools, mcp_calls, span)) as running:
                    async for tool_event in running:
                        if isinstance(tool_event, ToolsRan):
                            outputs = tool_event.outputs
                        yield tool_event
                stats.tools_called.extend(call.name for call in mcp_calls)
                answered.update(_same_call(c) for c, o in zip(mcp_calls, outputs, strict=True) if not o.retryable)
            if client_calls:
                # Ours ran; the client gets its own. Remember ours so the model sees the whole turn again when
                # the client comes back with its results.
                if mcp_calls and memory is not None:
                    await memory.remember_mixed_turn(_rounds(messages[first_count:]),
                                                     _assistant_message(turn.content, calls),
                                                     _tool_messages(mcp_calls, outputs), [c.id for c in client_calls],
                                                     options.prompt_messages)
                yield (finished := Finished("tool_calls", stats.usage, client_calls))
                return
            messages = await _next_messages(messages, turn.content, mcp_calls, outputs, options.sees_images)
            _release_forced_choice(request)
    except BaseException as exc:  # the span says how the request ended, whatever ended it
        failure = exc
        raise
    finally:
        end_chat_span(span, rounds=stats.rounds, usage=stats.usage, error=failure,
                      finish_reason=finished.finish_reason if finished else None)


async def _ask(
    upstream: ChatUpstream, request: dict[str, Any], turn: TurnAccumulator, *, first: bool
) -> AsyncIterator[Started | TextDelta]:
    """One round: the upstream's answer folded into `turn`, its visible text passed on as it comes."""
    async with upstream.stream_chat(request) as batches:
        if first:
            yield Started()
        async for batch in batches:
            # What arrived together goes on together: a read of an unpaced stream holds hundreds of tokens.
            content, reasoning = [], []
            for chunk in batch:
                delta = turn.add(chunk)
                content.append(delta.content)
                reasoning.append(delta.reasoning)
            if any(content) or any(reasoning):
                yield TextDelta("".join(content), "".join(reasoning))
    tail = turn.finish()
    if tail.content or tail.reasoning:
        yield tail


def _count(stats: RequestStats, round_number: int, turn: TurnAccumulator) -> None:
    stats.rounds = round_number
    if turn.usage is not None:  # summed over every round
        stats.usage = stats.usage or Usage()
        stats.usage.add(turn.usage)


async def _within_budget(
    messages: list[dict[str, Any]], mcp_tools: RequestTools, client_tools: list[dict[str, Any]], options: LoopOptions,
    stats: RequestStats,
) -> tuple[RequestTools, list[dict[str, Any]]]:
    """The MCP tools and client tools to offer: all of them, unless the tool budget leaves some out."""
    choice = None
    if options.tool_budget is not None and mcp_tools.openai_tools:
        choice = await options.tool_budget(messages, mcp_tools.openai_tools, client_tools)
    if choice is not None:
        mcp_tools = mcp_tools.only(choice.kept)
        sent = choice.compacted_client_tools if choice.compacted_client_tools is not None else client_tools
        client_tools = [tool for tool in sent if _tool_name(tool) in choice.kept]
        stats.tools_withheld = len(choice.withheld)
    stats.tools_offered = len(mcp_tools.openai_tools) + len(client_tools)
    return mcp_tools, client_tools


async def _first_messages(
    body: dict[str, Any], request: dict[str, Any], history: RestoredHistory, mcp_tools: RequestTools,
    options: LoopOptions, memory: TurnMemory | None,
) -> list[dict[str, Any]]:
    """The client's history as the model should see it: earlier turns given back their MCP calls and
    results (fitted into the context), our traces removed, and the system hint added when there are MCP
    tools to read results of."""
    messages = history.messages
    if memory is not None and history.restored_results and options.context_tokens is not None:
        allowance = prompt_allowance(await options.context_tokens(), body, request.get("tools") or [])
        messages = memory.fit(history, allowance)
    if options.system_hint and mcp_tools.openai_tools:
        messages = with_system_hint(messages, options.system_hint)
    return messages


async def _next_messages(
    messages: list[dict[str, Any]], content: str, calls: list[ToolCall], outputs: list[ToolOutput],
    sees_images: Callable[[], Awaitable[bool]] | None,
) -> list[dict[str, Any]]:
    """The history for the next round: this round's calls and their results, and the images they returned
    if the model can see them."""
    following = [*messages, _assistant_message(content, calls), *_tool_messages(calls, outputs)]
    images = [image for output in outputs for image in output.images]
    if images and sees_images is not None and await sees_images():
        following.append(_image_message(images))
    return following


def _first_request(
    body: dict[str, Any], offered: Sequence[dict[str, Any]], client_tool_names: set[str],
    client_tools: list[dict[str, Any]],
) -> dict[str, Any]:
    request = dict(body)
    # A client tool keeps its name. The pool already renamed ours away from the client's; one that still
    # clashes (a runner that did not) is left out rather than sent twice.
    mcp_tools = [t for t in offered if t["function"]["name"] not in client_tool_names]
    if mcp_tools or client_tools != (body.get("tools") or []):  # the budget may have left out or compacted some
        request["tools"] = [*client_tools, *mcp_tools]
        if not request["tools"]:  # the budget left nothing: no empty list, which some servers refuse
            del request["tools"]
            request.pop("tool_choice", None)
    # A client that does not stream gets whole upstream answers: one JSON read instead of a chunk
    # per token. Streamed, usage is summed over every round, so it is asked for either way.
    if body.get("stream"):
        request["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
    return request


def _without_traces(messages: list[dict[str, Any]]) -> RestoredHistory:
    """Without memory: the history with our traces removed, nothing given back."""
    cleaned = []
    for message in messages:
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, str) and strip_trace(content) != content:
            message = {**message, "content": strip_trace(content)}
        cleaned.append(message)
    return RestoredHistory(cleaned, [], 0)


def _rounds(added: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """This request's rounds as memory keeps them: calls and results, without the images shown after them."""
    return [message for message in added if message.get("role") != "user"]


def with_system_hint(messages: list[dict[str, Any]], hint: str) -> list[dict[str, Any]]:
    """The hint added once: to the client's own system message if it has one, else as a new one first."""
    first = messages[0] if messages else {}
    if first.get("role") in ("system", "developer"):
        content = first.get("content")
        if isinstance(content, str):
            if hint in content:
                return messages
            return [{**first, "content": f"{content}\n\n{hint}"}, *messages[1:]]
        if isinstance(content, list):
            if any(isinstance(p, dict) and p.get("text") == hint for p in content):
                return messages
            return [{**first, "content": [*content, {"type": "text", "text": hint}]}, *messages[1:]]
    return [{"role": "system", "content": hint}, *messages]


def _image_message(images: list[ImagePart]) -> dict[str, Any]:
    # Tool messages carry text only, so a vision model sees the images in a user turn right after them.
    parts: list[dict[str, Any]] = [{"type": "text", "text": "Images returned by the tool calls above:"}]
    parts += [image_part(i.mime_type, i.data) for i in images]
    return {"role": "user", "content": parts}


def _release_forced_choice(request: dict[str, Any]) -> None:
    # "required" or a named function forced the first call; repeating it would never let the model answer.
    choice = request.get("tool_choice")
    if choice == "required" or isinstance(choice, dict):
        del request["tool_choice"]


async def _run_tools(
    tools: RequestTools, calls: list[ToolCall], span: Span
) -> AsyncGenerator[ToolsStarted | ToolProgress | ToolsRan, None]:
    """Runs the calls at once, passing on their progress as it comes; ends with `ToolsRan`."""
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
            output = outputs[index] = await tools.call_tool(call.name, call.arguments, report)
            if output.is_error:
                tool_failed(call_span, "tool_error")
        durations[index] = (time.perf_counter() - started) * 1000

    async def run_all() -> None:
        async with progress_in, anyio.create_task_group() as calls_group:
            for index, call in enumerate(calls):
                calls_group.start_soon(run, index, call)

    async with anyio.create_task_group() as group:
        group.start_soon(run_all)
        async with progress_out:
            async for progress in progress_out:
                yield progress
    yield ToolsRan(calls, [output for output in outputs if output is not None], durations)


def _assistant_message(content: str, calls: list[ToolCall]) -> dict[str, Any]:
    # "" rather than null: OpenAI, LM Studio and llama.cpp take either, llama-cpp-python's server only a string.
    return {"role": "assistant", "content": content, "tool_calls": [c.to_message_part() for c in calls]}


def _tool_messages(calls: list[ToolCall], outputs: list[ToolOutput]) -> list[dict[str, Any]]:
    return [
        {"role": "tool", "tool_call_id": call.id, "content": output.content}
        for call, output in zip(calls, outputs, strict=True)
    ]


def _same_call(call: ToolCall) -> tuple[str, str]:
    """The call's name and arguments in one spelling, so that key order and spaces do not hide a repeat."""
    try:
        return call.name, json.dumps(json.loads(call.arguments or "{}"), sort_keys=True)
    except ValueError:
        return call.name, call.arguments.strip()


def _tool_names(tools: list[dict[str, Any]]) -> set[str]:
    return {name for tool in tools if isinstance(name := _tool_name(tool), str)}


def _tool_name(tool: dict[str, Any]) -> str | None:
    return (tool.get("function") or {}).get("name")


def _plain_finish_reason(reason: str | None) -> str:
    # "tool_calls"/"tool" without any call left (e.g. empty names) would make clients wait for calls.
    if reason in (None, "tool_calls", "tool", "function_call"):
        return "stop"
    return reason
