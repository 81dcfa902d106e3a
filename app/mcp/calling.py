"""One tool call on one live connection: arguments checked, a deadline that progress extends, and
whatever the SDK raises sorted into what the model is told, or into "the connection was lost".

Also the count of calls running on a server, which a reload waits on. Which connection to use, and
whether to try again after a loss, is the server's supervisor's business (supervisor.py).
"""

import json
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import anyio
import structlog
from mcp import Client, MCPError
from mcp.shared.dispatcher import ProgressFnT
from mcp.types import (
    INVALID_PARAMS,
    REQUEST_TIMEOUT,
    CallToolResult,
    ElicitResult,
    InputRequiredResult,
    InputResponses,
    ListResourcesResult,
    ReadResourceResult,
)
from pydantic import ValidationError

from app.chat.ports import InputNeeded, ProgressReport, TaskAsk, TaskMark, ToolAnswers
from app.mcp.arguments import problems
from app.mcp.connect import tracking_delivery
from app.mcp.convert import ToolRoute
from app.mcp.input_rounds import call_tool, input_needed
from app.mcp.resources import read_or_list, wants_something
from app.mcp.results import (
    FailureKind,
    ToolOutcome,
    render_failure,
    render_input_needed,
    render_listing,
    render_resource,
    render_result,
)
from app.mcp.skills import skill_uri
from app.mcp.tasks import (
    TaskHandle,
    TaskNews,
    answered,
    asks_through_result,
    awaited_result,
    cancelled,
    cancelled_note,
    ended_note,
    follow_task,
    running_note,
    start_task,
    waited,
)
from app.mcp.watching import connection_gone, session_gone
from app.openai.result_format import RenderOptions
from app.openai.wire import JSONObject, JSONValue
from app.ops.call_record import CallRecord, ToolCallObserver

# The SDK's own read timeout is a backstop a little past our cap; our deadline normally acts first.
CALL_TIMEOUT_SLACK = 5.0
# What a model is told to wait before retrying a call that timed out.
RETRY_AFTER_SECONDS = 5
UNUSABLE_ANSWER = "The person's answer came too late or could not be used"
# A 2025-era server's question held for the person (held_calls.py): how long it waits for the answer (as long as
# server-everything waits for it), and how many questions one call may ask.
HOLD_SECONDS = 600.0
QUESTIONS_PER_CALL = 3
FOLLOW_TIMEOUT = 30.0  # seconds: a background task's status, or its result once it ended, the server has at hand


def call_record(server: str | None, tool: str, ended: "CallEnded", seconds: float, arguments: str) -> CallRecord:
    """What the metrics and the recent calls learn of an ended call."""
    outcome = ended.outcome
    kind = ended.failure.value if ended.failure else "error" if outcome.is_error else (
        "input_needed" if outcome.input_needed else "ok")
    return CallRecord(server, tool, kind, seconds, outcome.error_message, arguments, outcome.content)


log = structlog.get_logger("toolbridge.mcp")


@dataclass(frozen=True)
class CallEnded:
    """The call ended, well or not; `failure` says how it failed, for the log."""

    outcome: ToolOutcome
    failure: FailureKind | None = None


def unknown_tool(name: str, similar: list[str], rendering: RenderOptions) -> CallEnded:
    """A call of a name no tool has: the failure to tell the model, with the names it may have meant."""
    hint = f" Did you mean: {', '.join(similar)}?" if similar else ""
    outcome = render_failure(FailureKind.UNKNOWN_TOOL, f"There is no tool named '{name}'.{hint}", rendering,
                             similar_tools=list[JSONValue](similar))
    return CallEnded(outcome, FailureKind.UNKNOWN_TOOL)


@dataclass(frozen=True)
class ConnectionLost:
    """The connection died under the call. `never_ran`: the server cannot have run it."""

    never_ran: bool


@dataclass(frozen=True)
class Limits:
    timeout: float  # without progress
    cap: float  # with progress
    tracked: bool  # a streamable HTTP connection, which can tell a refused request from a lost one
    task_wait: float = 10.0  # how long a tool run as an MCP task is waited for before the request goes on (tasks.py)


class McpCall:
    """One call of one tool, possibly sent twice (once per connection): the clock runs from creation."""

    def __init__(self, route: ToolRoute, rendering: RenderOptions, on_progress: ProgressReport | None,
                 reader: str | None = None, answers: ToolAnswers | None = None) -> None:
        """`reader`: the tool offered for the server's resources, which the result's links name. `answers`: the
        person's answers to the questions this call came back with before (sent with the server's state)."""
        self.route, self._rendering, self._on_progress, self._reader = route, rendering, on_progress, reader
        self.answers = answers
        self.started = time.perf_counter()
        self._deadline: _ProgressDeadline | None = None  # while the call is being sent
        self.task: TaskNews | None = None  # the MCP task it started or asked about, as its server last said
        self.awaiting: str | None = None  # a 2025 task whose `tasks/result` this call waits on (its questions)
        self.started_task = False  # the call made its task (else it asks about one an earlier turn started)

    @property
    def duration_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000

    def record(self, ended: "CallEnded", observer: ToolCallObserver | None, arguments: str) -> None:
        """The call's log line, and the call for the observer."""
        route = self.route
        log.info("tool_call", server=route.server, tool=route.tool, duration_ms=round(self.duration_ms, 1),
                 ok=not ended.outcome.is_error, **({"failure": ended.failure.value} if ended.failure else {}),
                 **({"input_needed": True} if ended.outcome.input_needed else {}))
        if observer is not None:
            observer(call_record(route.server, route.tool, ended, self.duration_ms / 1000, arguments))

    def fail(self, kind: FailureKind, message: str, **details: JSONValue) -> CallEnded:
        return CallEnded(render_failure(kind, message, self._rendering, **details), kind)

    def asked(self, needed: InputNeeded) -> CallEnded:
        """The call waits for the person's answer to its server's question (held_calls.py)."""
        return CallEnded(render_input_needed(needed, self._rendering))

    @contextmanager
    def waiting_for_person(self) -> Iterator[None]:
        """The person's time does not count against the call's time limit."""
        deadline = self._deadline
        if deadline is None:
            yield
            return
        with deadline.paused():
            yield

    def checked_arguments(self, arguments: str) -> JSONObject | CallEnded:
        """The arguments as one JSON object that fits the tool's schema, or the failure to tell the model."""
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except ValueError as exc:  # JSONDecodeError, or an integer past Python's digit limit (no `msg` then)
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "a number too long to read"
            return self.fail(FailureKind.INVALID_ARGUMENTS,
                             f"The arguments are not valid JSON ({reason}). Send one JSON object.")
        if not isinstance(parsed, dict):
            return self.fail(FailureKind.INVALID_ARGUMENTS, "The arguments must be one JSON object.")
        wrong = problems(self.route.validator, parsed)
        if wrong:
            return self.fail(
                FailureKind.INVALID_ARGUMENTS, "Some arguments are missing or wrong; fix them and call again.",
                fields=[problem.as_dict() for problem in wrong],
            )
        if self.route.reads_resources and not wants_something(parsed):
            return self.fail(FailureKind.INVALID_ARGUMENTS, "Give the uri of a resource to read, or list: true.")
        return parsed

    async def send(self, client: Client, arguments: JSONObject, limits: Limits) -> CallEnded | ConnectionLost:
        server = self.route.server
        deadline = self._deadline = _ProgressDeadline(limits.timeout, max(limits.timeout, limits.cap))

        async def progressed(progress: float, total: float | None, message: str | None) -> None:
            deadline.extend()
            if self._on_progress is not None:
                await self._on_progress(progress, total, message)

        responses = self._responses()
        if isinstance(responses, CallEnded):
            return responses
        try:
            # A refused POST ends the wait at once: the SDK's sender may die of it without a word to us.
            result: CallToolResult | InputRequiredResult | ReadResourceResult | ListResourcesResult
            with deadline.scope, tracking_delivery(on_refused=deadline.scope.cancel) as delivery:
                result = await self._sent(client, arguments, limits, progressed, responses)
            if delivery.refused and limits.tracked:
                return ConnectionLost(never_ran=True)
            if deadline.scope.cancelled_caught:  # cancelling the call sent notifications/cancelled
                if self.awaiting is not None and self.task is not None:  # the wait ended; the task runs on
                    return CallEnded(self._rendered(running_note(server, self.task, started=self.started_task)))
                limit = "its limit of" if deadline.capped else "without progress for"
                return self.fail(FailureKind.TIMEOUT, f"The tool ran {limit} {deadline.elapsed:g} s and was stopped.",
                                 retry_after=RETRY_AFTER_SECONDS)
        except MCPError as exc:
            return self._refused(exc, limits, delivery.reached_server)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return ConnectionLost(never_ran=limits.tracked and not delivery.reached_server)
        except RuntimeError as exc:  # the SDK's outputSchema validation of the result; a server that asks forever
            return self.fail(FailureKind.SERVER_ERROR, f"MCP server '{server}' returned an invalid result: {exc}")
        return CallEnded(self._rendered(result))

    def _task_answers(self) -> dict[str, object]:
        """The person's answers to a task's questions, as `tasks/update` sends them (by the questions' keys)."""
        return dict(self.answers.responses) if self.answers is not None else {}

    @staticmethod
    async def _cancelled(client: Client, task_id: str) -> CallToolResult | TaskNews:
        try:
            return await cancelled(client, task_id)
        except MCPError:  # it had ended: its result, then
            return await follow_task(client, task_id)

    async def _sent(self, client: Client, arguments: JSONObject, limits: Limits, progressed: ProgressFnT,
                    responses: InputResponses | None
                    ) -> CallToolResult | InputRequiredResult | ReadResourceResult | ListResourcesResult:
        """What the server answers the call (the task's result or what the model is told of it, for a task)."""
        deadline = self._deadline
        assert deadline is not None
        if self.route.reads_resources or self.route.loads_skills:
            asked: JSONObject = {"uri": skill_uri(arguments)} if self.route.loads_skills else arguments
            return await read_or_list(client, asked)
        if self.awaiting is None and self.route.runs_as_task:  # a 2025 tool run as a task
            self.task, self.started_task = await start_task(client, self.route.tool, arguments), True
            return await self._awaited(client, self.task, limits, progressed)
        if self.awaiting is not None and self.task is not None:  # a later turn's, whose task waits for the person
            return await self._awaited(client, self.task, limits, progressed)
        called = await call_tool(
            # The SDK's own timeout is a backstop: the person's time, which ours leaves out, is in it.
            client, self.route.tool, arguments,
            read_timeout=deadline.cap + CALL_TIMEOUT_SLACK + HOLD_SECONDS * QUESTIONS_PER_CALL,
            progress=progressed, responses=responses, state=self.answers.state if self.answers else None,
        )
        if not isinstance(called, TaskHandle):
            return called
        self.task, self.started_task = called.news, True  # a 2026 server made the call a task
        deadline.scope.deadline = math.inf  # the wait is its limit: the task runs on in the server
        return await self._waited(client, self.task, limits.task_wait, progressed)

    async def _awaited(self, client: Client, task: TaskNews, limits: Limits, progressed: ProgressFnT) -> CallToolResult:
        """A 2025 task's result through `tasks/result` for the wait (past it, `send` tells the model it runs on); its
        questions come meanwhile, held as a call's (held_calls.py)."""
        assert self._deadline is not None
        self.awaiting = task.task_id
        self._deadline.scope.deadline = anyio.current_time() + limits.task_wait
        result = await awaited_result(client, task, progressed, self._seen)
        status = "failed" if result.is_error else "completed"
        self.task = TaskNews(task.task_id, status, "")
        # Ended within the wait of the call that started it: an ordinary call. Else marked, for the turns that follow.
        return result if self.started_task else ended_note(self.route.server, task.task_id, status, result)

    def _seen(self, news: TaskNews) -> None:
        self.task = news

    async def _waited(self, client: Client, task: TaskNews, wait: float, progressed: ProgressReport
                      ) -> CallToolResult | InputRequiredResult:
        """The task's result when it ends within the wait (listed as ended); its questions for the person when it
        asks some; else what the model is told of it."""
        ran = await waited(client, task, wait, progressed)
        if isinstance(ran, TaskNews):
            self.task = ran
            return ran.questions() or running_note(self.route.server, ran, started=True)
        self.task = TaskNews(task.task_id, "failed" if ran.is_error else "completed", "")
        return ran

    async def follow(self, client: Client, task_id: str, kind: TaskAsk = "follow") -> CallEnded | None:
        """The task this tool started in an earlier turn, asked about again (`kind`: or cancelled, or given the
        person's answers to its questions): its result once it ended (marked so), its next questions, or that it
        still runs."""
        server = self.route.server
        try:
            with anyio.fail_after(FOLLOW_TIMEOUT):
                if kind == "answer":
                    ran = await answered(client, task_id, self._task_answers())
                else:
                    ran = await (self._cancelled(client, task_id) if kind == "cancel" else follow_task(client, task_id))
        except TimeoutError:
            return self.fail(FailureKind.TIMEOUT, f"MCP server '{server}' did not say how its task is doing.",
                             retry_after=RETRY_AFTER_SECONDS)
        except MCPError as exc:
            if connection_gone(exc):  # the connection's end, not the task's: its mark stays, asked again next turn
                return self.fail(FailureKind.SERVER_UNAVAILABLE, f"MCP server '{server}' closed the connection.")
            if exc.code == REQUEST_TIMEOUT:
                return self.fail(FailureKind.TIMEOUT, f"MCP server '{server}' did not say how its task is doing.",
                                 retry_after=RETRY_AFTER_SECONDS)
            return self.fail(FailureKind.SERVER_ERROR, f"MCP server '{server}' no longer knows the background task "
                             f"{TaskMark(server, task_id, 'failed')} ({exc.message}): a task lives on the connection "
                             "and for the time the server keeps it. Call the tool again if the person still wants it.")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return self.fail(FailureKind.SERVER_UNAVAILABLE, f"MCP server '{server}' closed the connection.")
        if isinstance(ran, TaskNews):
            self.task = ran
            if asks_through_result(client, ran):  # None: wait on its tasks/result as a held call (live.py)
                self.awaiting = task_id
                return None
            if (questions := ran.questions()) is not None:  # asked of the person, as a call's questions are
                return CallEnded(self._rendered(questions))
            if ran.status == "cancelled":
                return CallEnded(self._rendered(cancelled_note(server, ran)))
            return CallEnded(self._rendered(running_note(server, ran, started=False)))
        status = "failed" if ran.is_error else "completed"
        self.task = TaskNews(task_id, status, "")
        return CallEnded(self._rendered(ended_note(server, task_id, status, ran)))

    def _responses(self) -> InputResponses | CallEnded | None:
        """The person's answers as the SDK sends them, or the failure when they cannot be read."""
        if self.answers is None:
            return None
        try:
            return {key: ElicitResult.model_validate(answer) for key, answer in self.answers.responses.items()}
        except ValidationError as exc:
            return self.fail(FailureKind.INVALID_ARGUMENTS, f"{UNUSABLE_ANSWER} ({exc.error_count()} problems "
                             "in it). Call the tool again to ask the person anew.")

    def _refused(self, exc: MCPError, limits: Limits, reached_server: bool) -> CallEnded | ConnectionLost:
        """An error answer to the call: a timeout, the server's refusal, or the connection's end."""
        if exc.code == REQUEST_TIMEOUT:
            return self.fail(FailureKind.TIMEOUT, f"The tool did not finish within {limits.timeout:g} s.",
                             retry_after=RETRY_AFTER_SECONDS)
        if self.answers is not None and exc.code == INVALID_PARAMS:
            # The arguments were accepted when the server asked; what it refuses now is its own state: too old
            # (a 2026 server keeps it 10 minutes), sealed by another key, or not for this call.
            return self.fail(FailureKind.SERVER_ERROR,
                             f"{UNUSABLE_ANSWER}: MCP server '{self.route.server}' no longer takes the call it "
                             f"answers ({exc.message}). "
                             "Call the tool again to ask the person anew.")
        if not connection_gone(exc):
            return self.fail(FailureKind.SERVER_ERROR,
                             f"MCP server '{self.route.server}' refused the call: {exc.message}")
        # An expired session is refused before the tool runs, like a connection that was never made.
        return ConnectionLost(never_ran=session_gone(exc) or (limits.tracked and not reached_server))

    def _rendered(
        self, result: CallToolResult | InputRequiredResult | ReadResourceResult | ListResourcesResult
    ) -> ToolOutcome:
        if isinstance(result, InputRequiredResult):
            return render_input_needed(input_needed(result), self._rendering)
        if isinstance(result, ReadResourceResult):
            return render_resource(result, self._rendering)
        if isinstance(result, ListResourcesResult):
            return render_listing(result, self._rendering)
        return render_result(result, self._rendering, self._reader)


class CallsInFlight:
    """The calls running on one server, so that a reload lets them finish before stopping it."""

    def __init__(self) -> None:
        self.count = 0
        self._idle: anyio.Event | None = None

    @contextmanager
    def running(self) -> Iterator[None]:
        self.count += 1
        try:
            yield
        finally:
            self.count -= 1
            if not self.count and self._idle is not None:
                self._idle.set()
                self._idle = None

    async def drained(self) -> None:
        if self.count:
            if self._idle is None:
                self._idle = anyio.Event()
            await self._idle.wait()


class _ProgressDeadline:
    """A call's time limit: `timeout` without progress, each progress note restarting it, never past `cap`."""

    def __init__(self, timeout: float, cap: float) -> None:
        self.timeout, self.cap = timeout, cap
        self.started = anyio.current_time()
        self.scope = anyio.CancelScope(deadline=self.started + timeout)

    def extend(self) -> None:
        self.scope.deadline = min(anyio.current_time() + self.timeout, self.started + self.cap)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No limit while the person answers; then the limit starts again, its cap moved by the time taken."""
        paused_at = anyio.current_time()
        self.scope.deadline = math.inf
        try:
            yield
        finally:
            self.started += anyio.current_time() - paused_at
            self.extend()

    @property
    def capped(self) -> bool:
        return self.scope.deadline >= self.started + self.cap

    @property
    def elapsed(self) -> float:
        return round(anyio.current_time() - self.started, 1)
