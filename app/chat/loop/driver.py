"""The tool loop: ask the upstream, run the MCP tools it calls, feed the results back, until it answers.

Written against the Protocols of `ports.py` (an upstream that streams chunks, a runner that owns tools),
so it imports no web framework and no SDK. It yields events; `streaming.py` turns them into what the
client receives. For a streaming client every round is streamed from the upstream: content is relayed
as it arrives and tool-call deltas are folded, never passed on, unless they call the client's own
tools. For a non-streaming client each round is one whole upstream answer, folded the same way.
What follows a round is decided by `decision.py`; this module asks, acts on the decision and reports, and forces or
releases the tool choice between rounds.
"""

from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import aclosing

from app.chat.events import Finished, LoopEvent, RoundBreak, Started, ToolsRan
from app.chat.loop.decision import (
    Action,
    Decision,
    End,
    Round,
    decide,
    is_last_round,
    same_call,
    split_calls,
    stopped_note,
)
from app.chat.loop.held import gated_calls
from app.chat.loop.pausing import ask_for_input, ask_person, resume
from app.chat.loop.state import (
    LoopState,
    RoundContext,
    assistant_message,
    round_messages,
    start_state,
    tool_messages,
)
from app.chat.loop.tool_runs import run_tools, sees_images
from app.chat.offer import offer_found
from app.chat.ports import ChatUpstream, LoopOptions, RequestStats, ToolOutput, ToolRunner, TurnMemory
from app.chat.turn import Turn
from app.openai.accumulate import ToolCall, TurnAccumulator, Usage
from app.openai.markup import TextDelta
from app.openai.wire import ChatBody
from app.ops.telemetry import end_chat_span, start_chat_span


async def run_tool_loop(
    turn: Turn,
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
    state = await start_state(turn, tools, options, stats, memory)
    span = start_chat_span(turn.model, turn.stream)
    finished: Finished | None = None
    failure: BaseException | None = None
    try:
        async with aclosing(_request(state, RoundContext(upstream, options, stats, memory, span))) as events:
            async for event in events:
                if isinstance(event, Finished):
                    finished = event
                yield event
    except BaseException as exc:  # the span says how the request ended, whatever ended it
        failure = exc
        raise
    finally:
        end_chat_span(span, rounds=stats.rounds, usage=stats.usage, error=failure,
                      finish_reason=finished.finish_reason if finished else None)


async def _request(state: LoopState, context: RoundContext) -> AsyncGenerator[LoopEvent, None]:
    """A round that waited for the person's yes first, if there is one; then the rounds. A background task's questions
    end the response before them."""
    if state.follow_asks:
        assert state.followed is not None
        yield Started()
        yield state.followed
        asked, state.followed = state.followed, None
        async with aclosing(ask_for_input("", asked.calls, asked.outputs, state, context)) as asking:
            async for event in asking:
                yield event
        return
    if state.held is not None:
        async with aclosing(resume(state, context)) as resuming:
            async for event in resuming:
                yield event
        if state.held.notice is not None or state.waiting_for_answer:
            return
    async with aclosing(_rounds(state, context)) as rounds:
        async for event in rounds:
            yield event


async def _rounds(state: LoopState, context: RoundContext) -> AsyncGenerator[LoopEvent, None]:
    """Round after round: ask, fold the turn, decide, act, until a decision ends the request (in the round
    past the limit at the latest)."""
    max_rounds = context.options.max_tool_rounds
    for number in range(1, max_rounds + 2):
        offer_found(state.request, state.offer.offered_names, state.answered, state.offer.mcp_tools)  # what it found
        if is_last_round(number, max_rounds, state.answering_now):
            forbid_calls(state.request)
        turn = TurnAccumulator(state.offer.offered_names)
        asked: ChatBody = {**state.request, "messages": state.messages}
        async for event in _shown(_ask(context.upstream, asked, turn, first=number == 1 and state.held is None), state):
            yield event
            if isinstance(event, Started) and state.followed is not None:  # the trace shows what the tasks said
                yield state.followed
                state.followed = None
        _count(context.stats, number, turn)
        calls = turn.tool_calls()
        mcp_calls, client_calls = split_calls(calls, state.offer.client_tool_names)
        gate = await gated_calls(mcp_calls, state.offer.mcp_tools, context.memory)
        done = Round(number, max_rounds, state.answering_now, turn.finish_reason, mcp_calls, client_calls,
                     frozenset(state.answered), gate.waiting)
        decision = decide(done)
        if decision.action is Action.ANSWER_NOW:
            state.answering_now = True
            continue
        if decision.action is Action.ASK:
            step = ask_person(turn.content, mcp_calls, gate.waiting, state, context)
        elif isinstance(decision, End) and decision.action is not Action.HAND_BACK:
            step = _answer(decision, turn.content, state, context)
        else:
            step = _run_calls(decision, turn.content, calls, mcp_calls, client_calls, state, context, gate.declined)
        async with aclosing(step) as acting:
            async for acted in acting:
                yield acted
        if isinstance(decision, End) or state.waiting_for_answer:
            return


async def _ask(
    upstream: ChatUpstream, request: ChatBody, turn: TurnAccumulator, *, first: bool
) -> AsyncIterator[Started | TextDelta]:
    """One round: the upstream's answer folded into `turn`, its visible text passed on as it comes."""
    async with upstream.stream_chat(request) as batches:
        if first:
            yield Started()
        async with aclosing(turn.fold(batches)) as deltas:
            async for delta in deltas:
                yield delta


async def _shown(
    events: AsyncIterator[Started | TextDelta], state: LoopState
) -> AsyncIterator[Started | TextDelta | RoundBreak]:
    """A round's events, its text kept as shown; where an earlier round's text came before, a break first."""
    first = True
    async for event in events:
        if isinstance(event, TextDelta) and event.content:
            if first and any(state.shown):
                yield RoundBreak()
            first = False
            state.shown.append(event.content)
        yield event


def _count(stats: RequestStats, round_number: int, turn: TurnAccumulator) -> None:
    stats.rounds = round_number
    if turn.usage is not None:  # summed over every round
        stats.usage = stats.usage or Usage()
        stats.usage.add(turn.usage)


async def _answer(end: End, content: str, state: LoopState, context: RoundContext) -> AsyncGenerator[LoopEvent, None]:
    """The turn's text is the answer; stopped at the limit without any, a note says why."""
    final = content
    if end.action is Action.STOP and not final:
        final = stopped_note(context.options.max_tool_rounds)
        state.shown.append(final)
        yield TextDelta(final)
    if context.memory is not None:
        await context.memory.remember_turn(state.our_rounds(), final, "".join(state.shown),
                                           context.options.prompt_messages)
    yield Finished(end.finish_reason, context.stats.usage)


async def _run_calls(
    decision: Decision, content: str, calls: list[ToolCall], mcp_calls: list[ToolCall], client_calls: list[ToolCall],
    state: LoopState, context: RoundContext, declined: Mapping[str, ToolOutput],
) -> AsyncGenerator[LoopEvent, None]:
    """Runs the round's MCP calls (but those the person's grants `declined`); then hands the client its own calls,
    or feeds the results back."""
    outputs: list[ToolOutput] = []
    if mcp_calls:
        async with aclosing(run_tools(state.offer.mcp_tools, mcp_calls, context.span, declined=declined)) as running:
            async for tool_event in running:
                if isinstance(tool_event, ToolsRan):
                    outputs = tool_event.outputs
                yield tool_event
        context.stats.tools_called.extend(call.name for call in mcp_calls)
        state.answered.update(same_call(c) for c, o in zip(mcp_calls, outputs, strict=True) if not o.retryable)
    if any(output.input_needed is not None for output in outputs):  # the server's questions, for the person
        async with aclosing(ask_for_input(content, mcp_calls, outputs, state, context)) as asking:
            async for event in asking:
                yield event
        return
    if isinstance(decision, End):
        # Ours ran (in this round or an earlier one); the client gets its own. Remember ours so the model sees
        # the whole turn again when the client comes back with its results.
        if (mcp_calls or state.our_rounds()) and context.memory is not None:
            await context.memory.remember_mixed_turn(state.our_rounds(), assistant_message(content, calls),
                                                     tool_messages(mcp_calls, outputs), [c.id for c in client_calls],
                                                     context.options.prompt_messages)
        yield Finished(decision.finish_reason, context.stats.usage, client_calls)
        return
    state.messages = round_messages(state.messages, content, mcp_calls, outputs,
                                    images_seen=await sees_images(outputs, context.options))
    release_forced_choice(state.request)


def forbid_calls(request: ChatBody) -> None:
    # Keep the tools so the model still understands the history; only forbid calling them.
    if request.get("tools"):
        request["tool_choice"] = "none"


def release_forced_choice(request: ChatBody) -> None:
    # "required" or a named function forced the first call; repeating it would never let the model answer.
    choice = request.get("tool_choice")
    if choice == "required" or isinstance(choice, dict):
        del request["tool_choice"]
