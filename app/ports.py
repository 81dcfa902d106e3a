"""The tool loop's boundary: what it is given (an upstream that streams, the tools of one request, its
options) and what it fills in (the request's stats). The upstream client and the MCP pool implement these
Protocols; tests implement them with plain Python (tests/test_loop.py)."""

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from app.openai.accumulate import Usage

if TYPE_CHECKING:  # trace.py reads ToolOutput from here
    from app.trace import RecordedCall


class ChatUpstream(Protocol):
    def stream_chat(self, body: dict[str, Any]) -> AbstractAsyncContextManager[AsyncIterator[dict[str, Any]]]: ...


class ImagePart(Protocol):
    @property
    def mime_type(self) -> str: ...

    @property
    def data(self) -> str: ...


class ToolOutput(Protocol):
    @property
    def content(self) -> str: ...

    @property
    def is_error(self) -> bool: ...

    @property
    def images(self) -> Sequence[ImagePart]: ...

    @property
    def retryable(self) -> bool: ...

    @property
    def data(self) -> Any: ...

    @property
    def error_message(self) -> str | None: ...


ProgressReport = Callable[[float, float | None, str | None], Awaitable[None]]


class RequestTools(Protocol):
    """The MCP tools of one request, fixed for its whole life: a tool list that changes meanwhile
    reaches the next request, so the model is never offered one list and called with another."""

    @property
    def openai_tools(self) -> Sequence[dict[str, Any]]: ...

    async def call_tool(self, name: str, arguments: str, on_progress: ProgressReport | None = None) -> ToolOutput: ...


class ToolRunner(Protocol):
    def tools_for_request(self, offered: bool, client_tools: frozenset[str]) -> RequestTools: ...


@dataclass
class RequestStats:
    """Filled in by the tool loop while a request runs; read by the request log line at its end."""

    rounds: int = 0
    tools_called: list[str] = field(default_factory=list)
    usage: Usage | None = None


@dataclass(frozen=True)
class LoopOptions:
    """What one request makes of the loop; `loop_options.py` reads it from the settings and the request."""

    max_tool_rounds: int
    system_hint: str | None = None
    sees_images: Callable[[], Awaitable[bool]] | None = None  # asked only once a tool returned an image
    offer_tools: bool = True
    # Earlier calls a client's history recorded (details traces), as the `tool` message the model saw;
    # None: such traces are only removed.
    recorded_result: "Callable[[RecordedCall], str] | None" = None
