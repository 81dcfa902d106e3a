"""A server's live connection as its calls see it: the client while a connection is published (none between
two), a call sent on it and once more on the next one when it was lost under the call and running it twice
does no harm, the prompts asked of it, and the count of calls running on it, which a reload lets finish. Calls
run through its `holder` (held_calls.py), which keeps a call whose 2025-era server asked the person a question
until the answer comes with a later request.

Which connection is live, and when the next one starts, is the supervisor's business (supervisor.py): it
publishes each connection here, and learns from `lost` and `needed` that a call found it gone.
"""

import anyio
from mcp import Client
from mcp.types import ElicitResult, GetPromptResult
from pydantic import ValidationError

from app.access import CURRENT_SCOPE
from app.chat.ports import task_of
from app.mcp.calling import HOLD_SECONDS, UNUSABLE_ANSWER, CallEnded, CallsInFlight, ConnectionLost, Limits, McpCall
from app.mcp.held_calls import Asked, CallHolder, HeldCalls, Stage, held_state
from app.mcp.prompts import PromptFailed, completions, get_prompt, skill_messages
from app.mcp.results import FailureKind
from app.mcp.status import ServerState, ServerStatus, unavailable
from app.mcp.task_book import TaskBook
from app.mcp.tasks import TaskNews, cancelled, task_news

# How long a safe call whose remote session expired waits for the reconnection before its one retry.
RECONNECT_WAIT = 10.0
NOTE_SECONDS = 5.0  # a task's line in the caller's list, written after its request


class LiveConnection:
    """One server's current connection, as the calls routed to it find it."""

    def __init__(self, name: str, status: ServerStatus, call_timeout: float, longest_call_timeout: float,
                 held: HeldCalls, task_wait: float = 10.0, task_book: TaskBook | None = None) -> None:
        """`status` is the supervisor's: a call for a server that is down is told its state. `held`: the pool's
        calls waiting for people, which bound how many wait."""
        self.name, self._status = name, status
        self._call_timeout, self._longest_call_timeout = call_timeout, longest_call_timeout
        self._task_wait, self._task_book = task_wait, task_book
        self.client: Client | None = None
        self.lost = anyio.Event()  # a call found the connection gone; replaced for each connection
        self.needed: anyio.Event | None = None  # set by a call that found the server down, during backoff
        self.in_flight = CallsInFlight()
        self.holder = CallHolder(name, self.in_flight, held)
        self._published = anyio.Event()
        self._signed_out = False  # this connection ended because the server took its sign-in back

    def publish(self, client: Client) -> None:
        self.client, self._signed_out = client, False
        self.next_publication().set()

    def sign_in_taken_back(self) -> None:
        """The connection ends for want of a sign-in: the calls it fails say so (and wait for no next one)."""
        self._signed_out = True
        self.lost.set()

    def withdraw(self) -> None:
        self.client = None

    async def call(self, call: McpCall, arguments: str) -> CallEnded:
        """Runs one call on the live connection; once more on the next connection when it was lost and
        running it twice does no harm (or it never ran at all). A call that waits for the person's answer
        ends as the question (`input_needed`); the same call with the answer (`call.answers`) goes on with it."""
        if call.answers is not None and (hold := held_state(call.answers.state)) is not None:
            return await self._answer_held(call, hold)
        client = self.client
        if client is None:
            if self.needed is not None:  # it served before: retry it now, not later
                self.needed.set()
            return call.fail(FailureKind.SERVER_UNAVAILABLE, unavailable(self.name, self._status.state))
        if call.answers is not None and (asked := task_of(call.answers.state)) is not None:
            try:
                followed = await call.follow(client, *asked)
                if followed is not None:
                    return followed
                # A 2025 task waiting for the person: its tasks/result runs as a call whose question is held.
                return self._ended(call, await self.holder.run(call, client, {}, self._limits()), "closed the "
                                   "connection while the task waited for the person.")
            finally:
                await self._note(call)
        parsed = call.checked_arguments(arguments)
        if isinstance(parsed, CallEnded):
            return parsed
        limits = self._limits()
        try:
            ended = await self.holder.run(call, client, parsed, limits)
        finally:  # a task the call started is listed even when the request ended first (its client left)
            await self._note(call)
        if isinstance(ended, ConnectionLost):
            self.lost.set()
            retry = (call.route.safe_to_retry or ended.never_ran) and not self._signed_out
            if retry and await self._reconnected(client):
                assert self.client is not None
                ended = await self.holder.run(call, self.client, parsed, limits)
        return self._ended(call, ended, "closed the connection; it is being restarted.")

    def _limits(self) -> Limits:
        return Limits(self._call_timeout, self._longest_call_timeout, self._status.transport == "http",
                      self._task_wait)

    async def _note(self, call: McpCall) -> None:
        """What the server said of the call's MCP task (if it runs as one), in the caller's list; shielded and
        bounded, as it may follow a cancelled request."""
        if call.task is None or self._task_book is None:
            return
        news, caller = call.task, CURRENT_SCOPE.get().caller
        with anyio.CancelScope(shield=True), anyio.move_on_after(NOTE_SECONDS):
            await self._task_book.note(caller, self.name, call.route.tool, news.task_id, news.status, news.message)
        self._task_book.asked(caller, self.name, news.task_id, news.status, news.poll_seconds)  # for the page

    async def task_news(self, task_id: str) -> TaskNews:
        """What the server says of one of its tasks now (for the status page). Raises: PromptFailed (the server is
        down), MCPError (it knows no such task)."""
        return await task_news(self._client(), task_id)

    async def _answer_held(self, call: McpCall, hold: str) -> CallEnded:
        """The person's answer to the question a held call waits on, and the call's next stage."""
        assert call.answers is not None
        try:
            answer = ElicitResult.model_validate(next(iter(call.answers.responses.values()), None))
        except ValidationError:
            return call.fail(FailureKind.SERVER_ERROR, f"{UNUSABLE_ANSWER}. Call the tool again to ask anew.")
        stage = await self.holder.answer(hold, answer)
        if stage is None:
            minutes = f"{HOLD_SECONDS / 60:g}"
            return call.fail(FailureKind.SERVER_UNAVAILABLE,
                             f"MCP server '{self.name}' no longer waits for this answer: a question waits {minutes} "
                             "minutes, in the gateway process that asked it (not another replica, nor after a "
                             "restart). Call the tool again to ask the person anew.")
        if isinstance(stage, ConnectionLost):  # not retried: the answer was for that call, on that connection
            return call.fail(FailureKind.SERVER_UNAVAILABLE, f"MCP server '{self.name}' closed the connection while "
                             "the tool waited for the answer; call it again.")
        return self._ended(call, stage, "")

    def _ended(self, call: McpCall, stage: Stage, lost: str) -> CallEnded:
        if isinstance(stage, Asked):
            return call.asked(stage.needed)
        if isinstance(stage, ConnectionLost):
            self.lost.set()
            if self._signed_out:
                return call.fail(FailureKind.SERVER_UNAVAILABLE, unavailable(self.name, ServerState.NEEDS_SIGN_IN))
            return call.fail(FailureKind.SERVER_UNAVAILABLE, f"MCP server '{self.name}' {lost}")
        return stage

    async def cancel_task(self, task_id: str) -> str:
        """Has the server cancel one of its tasks; the task's status after it. Raises: PromptFailed (the server is
        down), MCPError (it knows no such task, or the task had ended)."""
        return (await cancelled(self._client(), task_id)).status

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> GetPromptResult:
        """Raises: PromptFailed."""
        return await get_prompt(self._client(), self.name, name, arguments, self._call_timeout)

    async def load_skill(self, uri: str, request: str) -> GetPromptResult:
        """A skill's document and the person's request, as a prompt's messages. Raises: PromptFailed."""
        return await skill_messages(self._client(), self.name, (uri, request), self._call_timeout)

    async def complete(self, prompt: str, argument: str, partial: str, context: dict[str, str]) -> list[str]:
        """Raises: PromptFailed."""
        return await completions(self._client(), self.name, prompt, (argument, partial), context, self._call_timeout)

    def _client(self) -> Client:
        if self.client is None:
            raise PromptFailed(unavailable(self.name, self._status.state))
        return self.client

    async def _reconnected(self, old: Client) -> bool:
        """Waits, bounded, for the server's next connection after `old` was lost."""
        with anyio.move_on_after(RECONNECT_WAIT):
            while self.client in (None, old):
                await self.next_publication().wait()
            return True
        return False

    def next_publication(self) -> anyio.Event:
        """Set when the next connection is published."""
        if self._published.is_set():
            self._published = anyio.Event()
        return self._published
