"""The answer as every front door shows it: the tool loop's events made into text for the two channels (what
is said, and the reasoning beside it), the MCP calls that finished, and the ending.

One reading of the events for every wire format: Chat Completions (streaming.py), Responses, Anthropic's
Messages and Ollama's chat (app/doors/). What is shown of tool work (the trace, what results address to the
person), the blank line between rounds and the sign-in notice are decided here once; a door only spells the
parts in its own wire format.
"""

from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field

from app.chat.answer.trace import (
    PersonView,
    TraceMode,
    trace_texts,
)
from app.chat.events import (
    Finished,
    LoopEvent,
    RoundBreak,
    ServersNotReady,
    ToolProgress,
    ToolsRan,
    ToolsStarted,
    ToolsWaiting,
)
from app.chat.ports import ToolOutput
from app.openai.accumulate import ToolCall, Usage
from app.openai.markup import TextDelta


@dataclass(frozen=True)
class Delta:
    """Text for the person: `content` is said, `reasoning` goes beside it (folded away by most clients). `shown`:
    the content is what tool results address to the person (an image's link), not the model's words."""

    content: str = ""
    reasoning: str = ""
    shown: bool = False


@dataclass(frozen=True)
class CallsDone:
    """MCP calls that finished in a round, with what they returned: for a door whose wire format has items
    for them (Responses' `mcp_call`). Their trace has been given as Deltas already."""

    calls: list[ToolCall]
    outputs: list[ToolOutput]


@dataclass(frozen=True)
class Ended:
    """The answer is complete: why it stopped, its tokens, and the client's own tool calls handed back."""

    finish_reason: str
    usage: Usage | None
    client_tool_calls: list[ToolCall] = field(default_factory=list)


AnswerPart = Delta | CallsDone | Ended
ROUND_BREAK = "\n\n"


async def answer_parts(
    events: AsyncGenerator[LoopEvent, None], *, trace: TraceMode = "reasoning", person: PersonView | None = None,
    notice: str = "",
) -> AsyncGenerator[AnswerPart, None]:
    """The answer's parts, as the loop's events come. `person`: how what tool results address to the person is
    shown to them (None: not at all). `notice`: the person's alone too (sign-in links), after the rest of the
    answer. A failure of the loop (GatewayError) comes out of the iteration, for the door to spell."""
    last = ""  # the content given last, for a round's break
    async with aclosing(events):
        async for event in events:
            if isinstance(event, TextDelta):
                last = event.content or last
                yield Delta(event.content, event.reasoning)
            elif isinstance(event, RoundBreak) and (gap := _break_after(last)):
                last = gap
                yield Delta(gap)
            elif isinstance(event, ToolsStarted | ToolProgress | ToolsRan | ToolsWaiting | ServersNotReady):
                if isinstance(event, ToolsRan):
                    event = _finished(event)
                texts, for_person = trace_texts(trace, event, person)
                for text in texts:
                    if text.channel == "content":
                        last = text.text
                        yield Delta(text.text)
                    else:
                        yield Delta(reasoning=text.text)
                if isinstance(event, ToolsRan) and event.calls:
                    yield CallsDone(event.calls, event.outputs)
                if for_person:  # after the calls that returned it
                    last = for_person
                    yield Delta(for_person, shown=True)
            elif isinstance(event, Finished):
                if notice:
                    yield Delta(_before_notice(last) + notice)
                yield Ended(event.finish_reason, event.usage, event.client_tool_calls)


def _break_after(last: str) -> str:
    """A blank line after content that does not end a line already (a trace block does); nothing at the start."""
    return ROUND_BREAK if last and not last[-1].isspace() else ""


def _before_notice(content: str) -> str:
    """A blank line between the answer and the notice after it; nothing before a notice alone."""
    return "\n\n" if content.strip() and not content.endswith("\n\n") else ""


def _finished(event: ToolsRan) -> ToolsRan:
    """The calls that finished: one that came back with its server's question is shown waiting (ToolsWaiting)."""
    kept = [i for i, output in enumerate(event.outputs) if output.input_needed is None]
    if len(kept) == len(event.calls):
        return event
    return ToolsRan([event.calls[i] for i in kept], [event.outputs[i] for i in kept],
                    [event.durations_ms[i] for i in kept])
