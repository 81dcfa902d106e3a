"""A 2026-07-28 server that speaks the tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663), written with the mcp
SDK's extension surface: a call of `research` from a client that declares the extension is answered with a task
handle (`resultType: "task"`) and runs on in this process, three stages of `STAGE_SECONDS` (the first argument, or
`TASKING_STAGE_SECONDS`); `tasks/get` says how it
does (its result inline once completed), `tasks/cancel` stops it. Without the declaration the tool answers at once.

`research` with `topic` "fail" ends the task `failed` with a JSON-RPC error, as the extension says a failure is told;
with `topic` "tides", after its first stage the task asks which tides (`input_required`, an elicitation in
`inputRequests`) and waits for `tasks/update` to answer it.
For the status page's tests: `TASKING_POLL_MS` is the pollInterval it asks for (200 ms unless set);
`TASKING_GETS_TOGETHER=N` has each `tasks/get` but a task's first (the one that ends the gateway's wait) wait, at most
5 s, until N are being answered at once; its status message then ends "(asked K times, together)", K counting that
task's `tasks/get`s ("(asked K times)" when they were not together, or with `TASKING_TELL_GETS=1` alone).
`TASKING_EXIT_ON_GET=K`: the process exits, unanswered, at a task's K-th `tasks/get` (a connection that drops).
Its tasks belong to no session: served over streamable HTTP (`server.streamable_http_app()`), any client that knows
a task's id may ask about it, as a server backed by a job queue would let two gateway replicas do.
"""

import asyncio
import os
import secrets
import sys
from datetime import UTC, datetime
from typing import Any

import anyio
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp.types import RequestParams

TASKS = "io.modelcontextprotocol/tasks"
STAGES = ("Gathering sources", "Reading", "Writing the report")
STAGE_SECONDS = float(os.environ.get("TASKING_STAGE_SECONDS", "1"))
POLL_MS = int(os.environ.get("TASKING_POLL_MS", "200"))
GETS_TOGETHER = int(os.environ.get("TASKING_GETS_TOGETHER", "0"))
TELL_GETS = GETS_TOGETHER > 0 or os.environ.get("TASKING_TELL_GETS") == "1"
EXIT_ON_GET = int(os.environ.get("TASKING_EXIT_ON_GET", "0"))


class TaskId(RequestParams):
    task_id: str


class Answers(RequestParams):
    task_id: str
    input_responses: dict[str, Any]


QUESTION = "which-tides"
ASKED = {"method": "elicitation/create", "params": {
    "mode": "form", "message": "Which tides do you mean?",
    "requestedSchema": {"type": "object", "properties": {"kind": {"type": "string", "enum": ["ocean", "earth"]}},
                        "required": ["kind"]}}}


def now() -> str:
    return datetime.now(UTC).isoformat()


class Tasks(Extension):
    identifier = TASKS

    def __init__(self) -> None:
        self.tasks: dict[str, dict[str, Any]] = {}
        self.running: set[asyncio.Task[None]] = set()  # kept until each ends (the loop holds tasks weakly)
        self.answered: dict[str, anyio.Event] = {}
        self.answers: dict[str, str] = {}
        self.gets: dict[str, int] = {}  # each task's tasks/get so far
        self.getting = 0  # tasks/get being answered now
        self.together = anyio.Event()  # GETS_TOGETHER of them were at once

    def methods(self) -> list[MethodBinding]:
        return [MethodBinding("tasks/get", TaskId, self.get), MethodBinding("tasks/cancel", TaskId, self.cancel),
                MethodBinding("tasks/update", Answers, self.update)]

    async def update(self, ctx: Any, params: "Answers") -> dict[str, Any]:
        task = self.tasks[params.task_id]
        answer = params.input_responses.get(QUESTION)
        if task["status"] != "input_required" or not isinstance(answer, dict):
            raise ValueError("no question of this task waits for that answer")
        kind = (answer.get("content") or {}).get("kind") if answer.get("action") == "accept" else None
        task.update(status="working", statusMessage=f"Reading about {kind or 'any'} tides...", lastUpdatedAt=now())
        task.pop("inputRequests", None)
        self.answers[params.task_id] = str(kind or "any")
        self.answered[params.task_id].set()
        return {}

    async def get(self, ctx: Any, params: TaskId) -> dict[str, Any]:
        self.gets[params.task_id] = self.gets.get(params.task_id, 0) + 1
        if self.gets[params.task_id] == EXIT_ON_GET:
            os._exit(1)
        self.getting += 1
        try:
            if GETS_TOGETHER and self.gets[params.task_id] > 1:
                if self.getting >= GETS_TOGETHER:
                    self.together.set()
                with anyio.move_on_after(5):
                    await self.together.wait()
        finally:
            self.getting -= 1
        answer = {"resultType": "complete", **self.tasks[params.task_id]}
        if TELL_GETS:
            together = ", together" if self.together.is_set() else ""
            answer["statusMessage"] = f"{answer['statusMessage']} (asked {self.gets[params.task_id]} times{together})"
        return answer

    async def cancel(self, ctx: Any, params: TaskId) -> dict[str, Any]:
        task = self.tasks[params.task_id]
        if task["status"] in ("completed", "failed", "cancelled"):
            raise ValueError("the task has ended")
        task.update(status="cancelled", statusMessage="Cancelled by the client", lastUpdatedAt=now())
        return {}

    async def intercept_tool_call(self, params: Any, ctx: Any, call_next: Any) -> Any:
        declared = ((ctx.meta or {}).get("io.modelcontextprotocol/clientCapabilities") or {}).get("extensions") or {}
        if params.name != "research" or TASKS not in declared:
            return await call_next(ctx)
        task_id = secrets.token_hex(12)
        self.tasks[task_id] = {"taskId": task_id, "status": "working", "statusMessage": "Starting",
                               "createdAt": now(), "lastUpdatedAt": now(), "ttlMs": 600_000, "pollIntervalMs": POLL_MS}
        running = asyncio.get_running_loop().create_task(self.run(task_id, str((params.arguments or {}).get("topic"))))
        self.running.add(running)
        running.add_done_callback(self.running.discard)
        return {"resultType": "task", **self.tasks[task_id]}

    async def run(self, task_id: str, topic: str) -> None:
        task = self.tasks[task_id]
        for number, stage in enumerate(STAGES):
            if task["status"] == "cancelled":
                return
            if number == 1 and topic == "tides":
                self.answered[task_id] = anyio.Event()
                task.update(status="input_required", statusMessage="Which tides?", inputRequests={QUESTION: ASKED},
                            lastUpdatedAt=now())
                await self.answered[task_id].wait()
                topic = f"{self.answers[task_id]} tides"
            else:
                task.update(statusMessage=f"{stage}...", lastUpdatedAt=now())
            await anyio.sleep(STAGE_SECONDS)
        if task["status"] == "cancelled":
            return
        if topic == "fail":
            task.update(status="failed", lastUpdatedAt=now(), error={"code": -32603, "message": "The archive is down."})
            return
        task.update(status="completed", lastUpdatedAt=now(),
                    result={"content": [{"type": "text", "text": f"Research report: {topic}"}], "isError": False})


tasks = Tasks()
server = MCPServer("tasking", extensions=[tasks])


@server.tool()
def research(topic: str) -> str:
    """Research a topic: takes a few seconds, run as a task."""
    return f"Research report: {topic} (at once)"


if __name__ == "__main__":
    STAGE_SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else STAGE_SECONDS
    server.run()
