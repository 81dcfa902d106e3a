"""One tool call as operations learn of it (the metrics, the recent calls): plain data, so that they need
nothing of the MCP side that makes it (app/mcp/calling.py builds it when a call ends)."""

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class CallRecord:
    """One call. `server` is None for a name no tool has; `outcome` is ok, error, or how it failed;
    `arguments` as the model sent them and `result` as the model read it."""

    server: str | None
    tool: str
    outcome: str
    seconds: float
    error: str | None
    arguments: str
    result: str


ToolCallObserver = Callable[[CallRecord], None]
