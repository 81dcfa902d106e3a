"""The tool loop: ask the upstream, run the MCP tools it calls, feed the results back, until it answers.

Its face: `run_tool_loop` and the events it yields (app/chat/events.py). Inside: `driver.py` runs the rounds,
`decision.py` decides what follows each (pure), `state.py` holds what the rounds carry and the history the model is
sent (the first request, each round's calls and results), `tool_runs.py` runs one round's MCP calls, `held.py` is a
round held for the person (a yes, or the server's questions) and taken up again, `pausing.py` ends the response with
the question and resumes the round with the reply.
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
