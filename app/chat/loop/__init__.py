"""The tool loop: ask the upstream, run the MCP tools it calls, feed the results back, until it answers.

Its face: `run_tool_loop` and the events it yields. Inside: `driver.py` runs the rounds, `decision.py`
decides what follows each (pure), `state.py` holds what the rounds carry, `messages.py` builds what the
model is sent, `tool_runs.py` runs one round's MCP calls, `asking.py` holds a round for the person's yes
and resumes it with their reply.
"""

from app.chat.events import (
    Finished,
    LoopEvent,
    RoundBreak,
    ServersNotReady,
    Started,
    ToolProgress,
    ToolsRan,
    ToolsStarted,
    ToolsWaiting,
)
from app.chat.loop.driver import run_tool_loop

__all__ = [
    "Finished", "LoopEvent", "RoundBreak", "ServersNotReady", "Started", "ToolProgress", "ToolsRan", "ToolsStarted",
    "ToolsWaiting", "run_tool_loop",
]
