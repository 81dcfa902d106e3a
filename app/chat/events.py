"""What the tool loop tells its consumers, in the order it happens: `streaming.py` turns these into what the
client receives, `trace.py` into what people are shown of the tool work."""

from dataclasses import dataclass, field

from app.chat.ports import ToolOutput
from app.openai.accumulate import ToolCall, Usage
from app.openai.markup import TextDelta


@dataclass(frozen=True)
class Started:
    """The upstream accepted the first request: the response can be committed to a 200."""


@dataclass(frozen=True)
class RoundBreak:
    """A later round's text follows an earlier round's: the client shows a blank line between them, unless the
    trace between them ends a line already (otherwise "Let me check." and "It is sunny." run together)."""


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
class ToolsWaiting:
    """Calls the person is asked to approve (or, `for_answer`, whose server asked a question); the response
    ends after the question."""

    calls: list[ToolCall]
    for_answer: bool = False


@dataclass(frozen=True)
class ServersNotReady:
    """MCP servers the request waited for that were not ready when it went on (app/chat/server_starts.py): their
    tools are missing from the answer. Each as (server, why)."""

    servers: list[tuple[str, str]]


@dataclass(frozen=True)
class Finished:
    finish_reason: str
    usage: Usage | None
    client_tool_calls: list[ToolCall] = field(default_factory=list)


LoopEvent = (Started | TextDelta | RoundBreak | ToolsStarted | ToolProgress | ToolsRan | ToolsWaiting | ServersNotReady
             | Finished)
