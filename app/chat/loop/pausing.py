"""Where the loop waits for the person: a round that needs a yes (held.py) or answers to the server's questions
(held.py) ends the response with the question and is kept; the next request takes it up before its first
round (`resume`): the calls run, with the answers, or are refused, and the rounds go on from their results."""

from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing

from app.chat.asking import edited_note, new_reference
from app.chat.events import Finished, LoopEvent, Started, ToolsRan, ToolsWaiting
from app.chat.loop.decision import same_call
from app.chat.loop.held import Edited, Held, asking_text, needing_input, questions_text
from app.chat.loop.state import LoopState, RoundContext, assistant_message, image_message, tool_messages
from app.chat.loop.tool_runs import run_tools, sees_images
from app.chat.ports import ToolOutput
from app.openai.accumulate import ToolCall
from app.openai.markup import TextDelta
from app.openai.wire import Message


async def ask_person(
    content: str, mcp_calls: list[ToolCall], waiting: list[ToolCall], state: LoopState, context: RoundContext
) -> AsyncGenerator[LoopEvent, None]:
    """Nothing runs: the response ends with the question, and memory keeps the round (its MCP calls; the
    client's own, if any, are left for the model to make again) for the person's reply."""
    reference = new_reference()  # in the question and on the status page, which lists the round
    text = asking_text(content, waiting, state.offer.mcp_tools, reference)
    yield ToolsWaiting(waiting)
    state.shown.append(text)
    yield TextDelta(text)
    if context.memory is not None:
        servers = {call.name: state.offer.mcp_tools.server_of(call.name) for call in waiting}
        await context.memory.remember_waiting_turn(state.our_rounds(), assistant_message(content, mcp_calls),
                                                   [call.id for call in waiting], "".join(state.shown),
                                                   context.options.prompt_messages, servers=servers,
                                                   reference=reference)
    yield Finished("stop", context.stats.usage)


async def ask_for_input(
    content: str, calls: list[ToolCall], outputs: Sequence[ToolOutput], state: LoopState, context: RoundContext,
    *, again: bool = False,
) -> AsyncGenerator[LoopEvent, None]:
    """Some calls came back with the server's questions: the response ends with them, and memory keeps the round
    with the results of its calls that finished, for the person's answer. `again`: the calls are a waiting
    round's, taken up with the person's answers, and their server asks a next question; memory keeps only
    those that ask, after the others' results, as a continuation of that round."""
    asked = needing_input(calls, outputs)
    state.waiting_for_answer = True
    text = questions_text(content, asked, state.offer.mcp_tools, new_reference())
    yield ToolsWaiting([call for call, _ in asked], for_answer=True)
    state.shown.append(text)
    yield TextDelta(text)
    if context.memory is not None:
        finished = [(c, o) for c, o in zip(calls, outputs, strict=True) if o.input_needed is None]
        results = tool_messages([c for c, _ in finished], [o for _, o in finished])
        asking = [call for call, _ in asked]
        await context.memory.remember_waiting_turn(
            results if again else state.our_rounds(), assistant_message(content, asking if again else calls),
            [call.id for call in asking], "".join(state.shown), context.options.prompt_messages,
            after=() if again else results, inputs={call.id: needed for call, needed in asked}, continues=again)
    yield Finished("stop", context.stats.usage)


async def resume(state: LoopState, context: RoundContext) -> AsyncGenerator[LoopEvent, None]:
    """The waiting round taken up: its calls run (with the person's answers) or refused, their results after
    them; or the notice that nothing waits any more (or that an answer did not fit), or the server's next question,
    which end the request."""
    held = state.held
    assert held is not None
    yield Started()
    if held.notice is not None:
        async with aclosing(_noticed(held, state, context)) as noticed:
            async for event in noticed:
                yield event
        return
    outputs: dict[str, ToolOutput] = dict(held.refused)
    if held.edited:  # the model sees the calls as they run, and is told the person changed them
        state.messages = with_arguments(state.messages, held.calls)
    async with aclosing(_run_held(held, outputs, context, state)) as running:
        async for event in running:
            yield event
    for call_id, edits in held.edited.items():
        if (output := outputs.get(call_id)) is not None and output.input_needed is None:
            outputs[call_id] = Edited(output, edited_note(edits))
    calls, ordered = list(held.calls), [outputs[call.id] for call in held.calls]
    if any(output.input_needed is not None for output in ordered):  # the server's next question: asked in turn
        async with aclosing(ask_for_input("", calls, ordered, state, context, again=True)) as asking:
            async for event in asking:
                yield event
        return
    state.answered.update(same_call(c) for c, o in zip(calls, ordered, strict=True) if not o.retryable)
    state.messages = [*state.messages, *tool_messages(calls, ordered)]
    if await sees_images(ordered, context.options):
        state.messages.append(image_message([image for output in ordered for image in output.images]))
    if held.reply is not None:  # answered as a new message, after the calls' results
        state.messages.append(held.reply)
        if not held.decided:  # decided on the status page: the results are this turn's to keep (held.py)
            state.first_count = len(state.messages)


def with_arguments(messages: list[Message], calls: Sequence[ToolCall]) -> list[Message]:
    """The history with the assistant message that made `calls` holding their arguments as given now."""
    given = {call.id: call.arguments for call in calls}
    changed: list[Message] = []
    for message in messages:
        tool_calls = message.get("tool_calls")
        if message.get("role") == "assistant" and tool_calls and any(c.get("id") in given for c in tool_calls):
            message = {**message, "tool_calls": [
                {**c, "function": {**c["function"], "arguments": given[c["id"]]}} if c.get("id") in given else c
                for c in tool_calls]}
        changed.append(message)
    return changed


async def _noticed(held: Held, state: LoopState, context: RoundContext) -> AsyncGenerator[LoopEvent, None]:
    notice = held.notice or ""
    state.shown.append(notice)
    yield TextDelta(notice)
    if held.remember_notice and context.memory is not None:  # asked again: left out of later histories
        await context.memory.remember_reply(state.request["messages"], notice)
    yield Finished("stop", None)


async def _run_held(
    held: Held, outputs: dict[str, ToolOutput], context: RoundContext, state: LoopState
) -> AsyncGenerator[LoopEvent, None]:
    """The held calls that run, with the person's answers where they were asked; then those refused."""
    if run := held.to_run():
        async with aclosing(run_tools(state.offer.mcp_tools, run, context.span, held.answers)) as running:
            async for tool_event in running:
                if isinstance(tool_event, ToolsRan):
                    outputs.update(zip([call.id for call in run], tool_event.outputs, strict=True))
                yield tool_event
        context.stats.tools_called.extend(call.name for call in run)
    if held.refused:
        yield held.not_run()
