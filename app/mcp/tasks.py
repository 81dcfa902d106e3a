"""Tools a server runs as MCP tasks, on either wire the gateway speaks them on:

- 2025-11-25 (experimental there): a tool says `execution.taskSupport` "required" or "optional", the server declares
  `tasks.requests.tools.call`; the call asks for a task (`task: {ttl}`), awaits `tasks/result` (which returns as soon
  as the task ends) with `tasks/get` beside it for its status, and `tasks/cancel` cancels it. The mcp 2.x SDK refuses
  a `CreateTaskResult` to `call_tool`, so that call goes through the session's dispatcher as the SDK's own
  `send_request` would, less the result's validation.
- 2026-07-28, the extension `io.modelcontextprotocol/tasks` (SEP-2663): every call declares it (`TasksExtension`,
  given to each `Client`), and the server may answer any call with a task handle (`resultType: "task"`), which the
  SDK returns as the claim's model (`TaskHandle`); then `tasks/get` (whose answer carries the result once it ended)
  and `tasks/cancel`.

A task is waited for TOOLBRIDGE_TASK_WAIT seconds in the request that called it, its status messages shown as
progress; one that is still running then goes on without the request: the model is told it started, with its mark
(`TaskMark`), and a later turn of the chat asks the server again (`follow_task`) until it ended. A 2026 task that asks
the person a question midway (`input_required`) comes back as a call that asks (`TaskNews.questions`): the chat asks
it, and the answer comes back with ANSWER_STATE for `tasks/update`. A 2025 task's questions come only through its
blocking `tasks/result`: a task found waiting for the person has that request run as a held call (calling.py,
held_calls.py), so that its question is asked in the chat as any 2025 server's question in the middle of a call.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import anyio
from mcp import Client, MCPError
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.types import (
    CallToolRequest,
    CallToolRequestParams,
    CallToolResult,
    CancelTaskRequest,
    CancelTaskRequestParams,
    CancelTaskResult,
    CreateTaskResult,
    ElicitRequest,
    EmptyResult,
    GetTaskPayloadRequest,
    GetTaskPayloadRequestParams,
    GetTaskRequest,
    GetTaskRequestParams,
    GetTaskResult,
    InputRequiredResult,
    Request,
    RequestParams,
    Result,
    Task,
    TaskMetadata,
    TextContent,
    Tool,
)
from pydantic import ConfigDict, ValidationError

from app.chat.ports import ANSWER_STATE, TASK_ENDED, ProgressReport, TaskMark
from app.openai.wire import JSONObject

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TASK_TTL_MS = 24 * 3600 * 1000  # asked of a 2025 server; it may keep a task for less (its `ttl` says)
POLL_FIRST, POLL_MOST = 0.2, 2.0  # seconds between two `tasks/get` while the request waits, whatever the server asks
STATUS_EVERY = 0.5  # seconds between two status reads beside a 2025 task's `tasks/result` (its progress)


@dataclass(frozen=True)
class TaskNews:
    """What a task's server last said of it."""

    task_id: str
    status: str
    message: str
    poll_seconds: float = 0.0  # how often the server asks to be polled (0: it did not say)
    input_requests: dict[str, Any] | None = None  # a 2026 task's questions while `input_required`, as sent

    def questions(self) -> InputRequiredResult | None:
        """The task's questions for the person (its elicitations), as a call that asks them would come back; None
        when it asks none. Answered, they come back with ANSWER_STATE and go to `tasks/update`."""
        if self.status != "input_required" or not self.input_requests:
            return None
        try:
            asked = InputRequiredResult.model_validate({"inputRequests": self.input_requests,
                                                        "requestState": ANSWER_STATE + self.task_id})
        except ValidationError:
            return None
        elicits = any(isinstance(request, ElicitRequest) for request in (asked.input_requests or {}).values())
        return asked if elicits else None


class _TaskFields(Result):
    """What the tasks extension's task shapes share."""

    model_config = ConfigDict(extra="allow")
    task_id: str
    status: Literal["working", "input_required", "completed", "failed", "cancelled"]
    status_message: str | None = None
    poll_interval_ms: int | None = None

    @property
    def news(self) -> TaskNews:
        return TaskNews(self.task_id, self.status, self.status_message or "", (self.poll_interval_ms or 0) / 1000,
                        self.asked())

    def asked(self) -> dict[str, Any] | None:
        """The task's questions while `input_required` (not on a claim model: the SDK reserves `inputRequests`)."""
        return None


class TaskHandle(_TaskFields):
    """A 2026 server's answer to a call that became a task (the extension's `CreateTaskResult`)."""

    result_type: Literal["task"] = "task"


async def _not_resolved_here(claimed: TaskHandle, context: ClaimContext) -> CallToolResult:
    raise RuntimeError("a task is followed by the gateway (call_tool with allow_claimed)")


class TasksExtension(ClientExtension):
    """Declares the tasks extension on each 2026 call, and takes its task handle as a result."""

    identifier = TASKS_EXTENSION

    def claims(self) -> tuple[ResultClaim[TaskHandle]]:
        return (ResultClaim(result_type="task", model=TaskHandle, resolve=_not_resolved_here),)


class _TaskId(RequestParams):
    task_id: str


class _Answers(RequestParams):
    task_id: str
    input_responses: dict[str, Any]


class _UpdateTask(Request[_Answers, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: _Answers


class _GetTask(Request[_TaskId, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: _TaskId


class _CancelTask(Request[_TaskId, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: _TaskId


class _DetailedTask(_TaskFields):
    """The extension's `tasks/get` answer: the task, with its result or error once it ended."""

    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None

    def asked(self) -> dict[str, Any] | None:
        return self.input_requests


def runs_tasks(client: Client) -> bool:
    """Whether the server runs tool calls as tasks on a wire the gateway speaks them on."""
    capabilities = client.server_capabilities
    legacy = capabilities.tasks
    extensions = capabilities.extensions or {}
    return TASKS_EXTENSION in extensions or (legacy is not None and legacy.requests is not None
                                             and legacy.requests.tools is not None)


def must_run_as_task(tool: Tool) -> bool:
    """A 2025 tool that only runs as a task (a 2026 server decides call by call, and says nothing beforehand)."""
    return _task_support(tool) == "required"


def may_run_as_task(tool: Tool) -> bool:
    """A 2025 tool that runs as a task when asked (`optional`) or only so: the gateway asks for one, so that a call
    past TOOLBRIDGE_TASK_WAIT goes on without the request."""
    return _task_support(tool) in ("required", "optional")


def _task_support(tool: Tool) -> str | None:
    execution = getattr(tool, "execution", None)
    return getattr(execution, "task_support", None)


def _modern(client: Client) -> bool:
    return client.server_capabilities.tasks is None


async def start_task(client: Client, tool: str, arguments: JSONObject) -> TaskNews:
    """A 2025 server's task for the call, as it was made."""
    session = client.session
    request = CallToolRequest(params=CallToolRequestParams(name=tool, arguments=arguments,
                                                           task=TaskMetadata(ttl=TASK_TTL_MS)))
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    options: dict[str, object] = {}
    session._stamp(data, options)  # type: ignore[arg-type]  # the headers send_request would send (Mcp-Name)
    raw = await session._dispatcher.send_raw_request(data["method"], data.get("params"), options)  # type: ignore[arg-type]
    return _legacy_news(CreateTaskResult.model_validate(raw).task)


async def awaited_result(client: Client, task: TaskNews, on_status: ProgressReport | None,
                         seen: Callable[[TaskNews], None]) -> CallToolResult:
    """A 2025 task's result through `tasks/result`, which returns as soon as the task ends (and carries its questions
    meanwhile); its status asked beside it, each new message shown as progress and `seen`. The caller bounds it."""

    async def statuses() -> None:
        said, polls = task.message, 0
        while True:
            await anyio.sleep(max(task.poll_seconds, STATUS_EVERY))
            asked, polls = await _asked(client, task.task_id), polls + 1
            if isinstance(asked, TaskNews):
                seen(asked)
                if on_status is not None and asked.message and asked.message != said:
                    said = asked.message
                    await on_status(polls, None, said)

    async with anyio.create_task_group() as group:
        group.start_soon(statuses)
        result = await task_result(client, task.task_id)
        group.cancel_scope.cancel()
    return result


async def waited(client: Client, task: TaskNews, wait: float, on_status: ProgressReport | None
                 ) -> CallToolResult | TaskNews:
    """A 2026 task's result when it ends within `wait` seconds; else the task as it runs on (or asks)."""
    with anyio.move_on_after(wait):
        return await _ended(client, task, on_status)
    return await _asked(client, task.task_id)  # (with its questions, when it asks some)


async def follow_task(client: Client, task_id: str) -> CallToolResult | TaskNews:
    """The task's result once it ended (a failed task's too: what went wrong), else the task as it runs on, or as it
    was cancelled.

    Raises: MCPError: the server knows no such task (another session's, or past its time to live)."""
    asked = await _asked(client, task_id)
    if isinstance(asked, TaskNews) and asked.status in TASK_ENDED and asked.status != "cancelled":
        return await task_result(client, task_id)  # a 2025 task (a 2026 task's result came with the answer)
    return asked


async def answered(client: Client, task_id: str, responses: dict[str, Any]) -> CallToolResult | TaskNews:
    """The task after the person's answers to its questions were given to it (`tasks/update`, 2026).

    Raises: MCPError: the server refused them, or knows no such task."""
    await client.session.send_request(_UpdateTask(params=_Answers(task_id=task_id, input_responses=responses)),
                                      EmptyResult)
    return await follow_task(client, task_id)


async def cancelled(client: Client, task_id: str) -> TaskNews:
    """The task after the server was asked to cancel it.

    Raises: MCPError: the server knows no such task, or it had ended (the spec's -32602)."""
    if _modern(client):
        await client.session.send_request(_CancelTask(params=_TaskId(task_id=task_id)), EmptyResult)
        asked = await _asked(client, task_id)
        return asked if isinstance(asked, TaskNews) else TaskNews(task_id, "completed", "")
    return _legacy_news(await client.session.send_request(
        CancelTaskRequest(params=CancelTaskRequestParams(task_id=task_id)), CancelTaskResult))


async def task_news(client: Client, task_id: str) -> TaskNews:
    """What the server says of the task now, without fetching a result."""
    asked = await _asked(client, task_id)
    if isinstance(asked, TaskNews):
        return asked
    return TaskNews(task_id, "failed" if asked.is_error else "completed", "")


def asks_through_result(client: Client, task: TaskNews) -> bool:
    """A 2025 task that waits for the person: its questions come only while `tasks/result` is open."""
    return not _modern(client) and task.status == "input_required"


def running_note(server: str, task: TaskNews, *, started: bool) -> CallToolResult:
    """What the model is told of a task still running: that the answer goes on without its result."""
    doing = f' ("{task.message}")' if task.message else ""
    first = ("The tool started a background task on the MCP server" if started else
             "The background task this tool started earlier is still running on the MCP server")
    text = (f"{first} '{server}'{doing} {TaskMark(server, task.task_id, task.status)}. It goes on after this answer: "
            "tell the person it is running, that they can ask whether it is done, and that the gateway's status "
            "page lists it (Background tasks). Its result is given to you in a later turn of this chat once it is "
            "ready; do not call the tool again for it.")
    return CallToolResult(content=[TextContent(type="text", text=text)])


def cancelled_note(server: str, task: TaskNews) -> CallToolResult:
    said = TaskMark(server, task.task_id, "cancelled")
    text = f"The background task this tool started earlier was cancelled {said}: no result will come."
    return CallToolResult(content=[TextContent(type="text", text=text)])


def ended_note(server: str, task_id: str, status: str, result: CallToolResult) -> CallToolResult:
    """The task's result, with the mark that tells later turns it ended."""
    said = TaskMark(server, task_id, status)
    first = TextContent(type="text", text=f"The background task this tool started earlier has ended {said}.")
    return result.model_copy(update={"content": [first, *result.content]})


async def _ended(client: Client, task: TaskNews, on_status: ProgressReport | None) -> CallToolResult | TaskNews:
    """A 2026 task polled until it ends (its result or error come with the answer that says so) or asks."""
    pause, said, polls = POLL_FIRST, task.message, 0
    asked: CallToolResult | TaskNews = task
    while isinstance(asked, TaskNews):
        if asked.questions() is not None:  # asked of the person now, not after the wait
            return asked
        if asked.status == "cancelled":  # by someone else meanwhile: the only end that comes without a result
            return CallToolResult(content=[TextContent(type="text", text="The task was cancelled.")], is_error=True)
        await anyio.sleep(min(max(asked.poll_seconds, pause), POLL_MOST))
        pause = min(pause * 2, POLL_MOST)
        asked, polls = await _asked(client, task.task_id), polls + 1
        if on_status is not None and isinstance(asked, TaskNews) and asked.message and asked.message != said:
            said = asked.message
            await on_status(polls, None, said)
    return asked


async def _asked(client: Client, task_id: str) -> CallToolResult | TaskNews:
    """What the server says of the task now: on the 2026 wire, its result once it ended."""
    if not _modern(client):
        return _legacy_news(await client.session.send_request(
            GetTaskRequest(params=GetTaskRequestParams(task_id=task_id)), GetTaskResult))
    detailed = await client.session.send_request(_GetTask(params=_TaskId(task_id=task_id)), _DetailedTask)
    if detailed.status == "completed":
        return CallToolResult.model_validate(detailed.result or {"content": []})
    if detailed.status == "failed":
        message = (detailed.error or {}).get("message") or detailed.status_message or "the task failed"
        return CallToolResult(content=[TextContent(type="text", text=str(message))], is_error=True)
    return detailed.news


async def task_result(client: Client, task_id: str) -> CallToolResult:
    """A 2025 task's result (`tasks/result`, which blocks until the task ends; its questions come through it)."""
    try:
        return await client.session.send_request(
            GetTaskPayloadRequest(params=GetTaskPayloadRequestParams(task_id=task_id)), CallToolResult)
    except MCPError as exc:  # a failed task's error
        return CallToolResult(content=[TextContent(type="text", text=exc.message)], is_error=True)


def _legacy_news(task: Task) -> TaskNews:
    return TaskNews(task.task_id, task.status, task.status_message or "", (task.poll_interval or 0) / 1000)


