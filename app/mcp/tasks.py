"""Tools a server runs as MCP tasks, on the 2025-11-25 wire (experimental there: a tool's `execution.taskSupport`,
the server's `tasks.requests.tools.call` capability; `tasks/get`, `tasks/result`, `tasks/cancel`).

The mcp 2.x SDK runs no tasks itself (its `call_tool` refuses a `CreateTaskResult`), so the call that creates one
goes through the session's dispatcher as the SDK's own `send_request` would, less the result's validation; polling
and the result are ordinary typed requests. A task is waited for TOOLBRIDGE_TASK_WAIT seconds in the request that
called it, its status messages shown as progress; one that is still running then goes on without the request: the
model is told it started, with its mark (`TaskMark`), and a later turn of the chat asks the server again
(`follow_task`) until it ended. The 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) is not
spoken yet: a modern server's task tools are not offered.
"""

from collections.abc import Callable
from dataclasses import dataclass

import anyio
from mcp import Client
from mcp.types import (
    CallToolRequest,
    CallToolRequestParams,
    CallToolResult,
    CancelTaskRequest,
    CancelTaskRequestParams,
    CancelTaskResult,
    CreateTaskResult,
    GetTaskPayloadRequest,
    GetTaskPayloadRequestParams,
    GetTaskRequest,
    GetTaskRequestParams,
    GetTaskResult,
    Task,
    TaskMetadata,
    TextContent,
    Tool,
)

from app.chat.ports import TASK_ENDED, ProgressReport, TaskMark
from app.openai.wire import JSONObject

TASK_TTL_MS = 24 * 3600 * 1000  # asked of the server; it may keep a task for less (its `ttl` says)
POLL_FIRST, POLL_MOST = 0.2, 2.0  # seconds between two `tasks/get` while the request waits, whatever the server asks


@dataclass(frozen=True)
class TaskNews:
    """What a task's server last said of it."""

    task_id: str
    status: str
    message: str

    @staticmethod
    def of(task: Task) -> "TaskNews":
        return TaskNews(task.task_id, task.status, task.status_message or "")


def runs_tasks(client: Client) -> bool:
    """Whether the server runs tool calls as tasks (on the 2025-11-25 wire; the capability is gone from later)."""
    tasks = client.server_capabilities.tasks
    return tasks is not None and tasks.requests is not None and tasks.requests.tools is not None


def must_run_as_task(tool: Tool) -> bool:
    execution = getattr(tool, "execution", None)
    return getattr(execution, "task_support", None) == "required"


async def run_task(client: Client, tool: str, arguments: JSONObject, wait: float,
                   on_status: ProgressReport | None, started: Callable[[Task], None]) -> CallToolResult | Task:
    """The tool's result when its task ends within `wait` seconds; else the task as it runs on. `started` learns
    of the task once the server made it."""
    task = await _created(client, tool, arguments)
    started(task)
    with anyio.move_on_after(wait):
        return await _ended(client, task, on_status)
    return await _status(client, task.task_id)


async def follow_task(client: Client, task_id: str) -> CallToolResult | Task:
    """The task's result once it ended (a failed task's too: the server says what went wrong in it), else the task
    as it runs on, or as it was cancelled.

    Raises: MCPError: the server knows no such task (another connection's, or past its time to live)."""
    task = await _status(client, task_id)
    if task.status in TASK_ENDED and task.status != "cancelled":  # a cancelled task has no result to fetch
        return await _result(client, task_id)
    return task


async def cancelled(client: Client, task_id: str) -> Task:
    """The task after the server was asked to cancel it (one that had ended stays as it ended).

    Raises: MCPError: the server knows no such task, or it ended already (the spec's -32602)."""
    return await client.session.send_request(CancelTaskRequest(params=CancelTaskRequestParams(task_id=task_id)),
                                             CancelTaskResult)


def running_note(server: str, task: Task, *, started: bool) -> CallToolResult:
    """What the model is told of a task still running: that the answer goes on without its result."""
    doing = f' ("{task.status_message}")' if task.status_message else ""
    first = ("The tool started a background task on the MCP server" if started else
             "The background task this tool started earlier is still running on the MCP server")
    text = (f"{first} '{server}'{doing} {TaskMark(server, task.task_id, task.status)}. It goes on after this answer: "
            "tell the person it is running and that they can ask whether it is done. Its result is given to you "
            "in a later turn of this chat once it is ready; do not call the tool again for it.")
    return CallToolResult(content=[TextContent(type="text", text=text)])


def cancelled_note(server: str, task: Task) -> CallToolResult:
    said = TaskMark(server, task.task_id, "cancelled")
    text = f"The background task this tool started earlier was cancelled {said}: no result will come."
    return CallToolResult(content=[TextContent(type="text", text=text)])


def ended_note(server: str, task_id: str, status: str, result: CallToolResult) -> CallToolResult:
    """The task's result, with the mark that tells later turns it ended."""
    said = TaskMark(server, task_id, status)
    first = TextContent(type="text", text=f"The background task this tool started earlier has ended {said}.")
    return result.model_copy(update={"content": [first, *result.content]})


async def _created(client: Client, tool: str, arguments: JSONObject) -> Task:
    session = client.session
    request = CallToolRequest(params=CallToolRequestParams(name=tool, arguments=arguments,
                                                           task=TaskMetadata(ttl=TASK_TTL_MS)))
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    options: dict[str, object] = {}
    session._stamp(data, options)  # type: ignore[arg-type]  # the headers send_request would send (Mcp-Name)
    raw = await session._dispatcher.send_raw_request(data["method"], data.get("params"), options)  # type: ignore[arg-type]
    return CreateTaskResult.model_validate(raw).task


async def _ended(client: Client, task: Task, on_status: ProgressReport | None) -> CallToolResult:
    pause, said, polls = POLL_FIRST, task.status_message, 0
    while task.status not in TASK_ENDED:
        asked = (task.poll_interval or 0) / 1000
        await anyio.sleep(min(max(asked, pause), POLL_MOST))
        pause = min(pause * 2, POLL_MOST)
        task, polls = await _status(client, task.task_id), polls + 1
        if on_status is not None and task.status_message and task.status_message != said:
            said = task.status_message
            await on_status(polls, None, said)
    return await _result(client, task.task_id)


async def _status(client: Client, task_id: str) -> Task:
    return await client.session.send_request(GetTaskRequest(params=GetTaskRequestParams(task_id=task_id)),
                                             GetTaskResult)


async def _result(client: Client, task_id: str) -> CallToolResult:
    return await client.session.send_request(
        GetTaskPayloadRequest(params=GetTaskPayloadRequestParams(task_id=task_id)), CallToolResult)
