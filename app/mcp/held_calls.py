"""Calls held while the person answers a question a 2025-era server asked in the middle of the call
(`elicitation/create`), to be answered in the person's next message, in this process.

Such a server waits for the answer inside the call, so the call cannot end with the request. Every call of a
connection therefore runs as a task of the pool (`CallHolder.run`), and the request waits for its next stage:
the call's end, or a question. On a question the request ends with it (the chat loop asks the person, as for a
2026-era `input_required` result) while the call goes on waiting in the server. The next message's answer finds
the call by the id kept with the question (`held_state`), is handed to the server, and the request waits for
the call's next stage again: its end, or its next question.

Which call a question is for: the one call running on that connection. Over stdio nothing else tells (the SDK
gives the callback no related request id), so while two calls run on one server, a question is declined, as it
was before questions could be held. Bounds: a question waits HOLD_SECONDS (then the server is told the person
cancelled, and the call runs to its end unobserved); a call asks at most QUESTIONS_PER_CALL questions. Another
replica, or this process after a restart, has no such call: the model is told to call the tool again.
"""

import contextlib
import secrets
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
import structlog
from mcp import Client
from mcp.client import ClientRequestContext
from mcp.types import ElicitRequestParams, ElicitResult

from app.chat.ports import InputNeeded
from app.mcp.calling import HOLD_SECONDS, QUESTIONS_PER_CALL, CallEnded, CallsInFlight, ConnectionLost, Limits, McpCall

log = structlog.get_logger("toolbridge.mcp")

_HELD = "toolbridge-held:"  # the state kept with a held call's question: this prefix, then the call's id


def held_state(state: str | None) -> str | None:
    """The held call's id in a question's state; None for a 2026-era server's own sealed state."""
    return state[len(_HELD):] if state is not None and state.startswith(_HELD) else None


@dataclass(frozen=True)
class Asked:
    """The call's server asked the person `params` (as JSON); the call waits under `hold`."""

    params: dict[str, Any]
    hold: str

    @property
    def needed(self) -> InputNeeded:
        return InputNeeded({self.hold: self.params}, _HELD + self.hold)


@dataclass(frozen=True)
class _Failed:
    error: Exception  # raised again in the request that waits: the call failed in a way nothing else catches


Stage = CallEnded | ConnectionLost | Asked


class _Running:
    """One call running as a pool task: the stages it reaches, in order, and the person's answer it waits for."""

    def __init__(self, call: McpCall) -> None:
        self.call = call
        self.scope = anyio.CancelScope()
        self.questions = 0
        self.waiting = False  # a question of it waits for the person
        self.stages, self.stage_reader = anyio.create_memory_object_stream[Stage | _Failed](
            QUESTIONS_PER_CALL + 2)
        self._answered = anyio.Event()
        self._answer = ElicitResult(action="cancel")

    def answer(self, result: ElicitResult) -> None:
        self._answer = result
        self._answered.set()

    def tell(self, stage: "Stage | _Failed") -> None:
        """The request waiting for the call learns of its next stage; nobody may wait any more (reader closed)."""
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            self.stages.send_nowait(stage)

    def forget(self) -> None:
        """Nobody will read the call's stages again."""
        self.stage_reader.close()

    async def asked(self, params: dict[str, Any], hold: str) -> ElicitResult | None:
        """Tells the request of the question and waits for the answer: None after HOLD_SECONDS."""
        self.questions += 1
        self._answered = anyio.Event()
        self.waiting = True
        self.tell(Asked(params, hold))
        try:
            with self.call.waiting_for_person(), anyio.move_on_after(HOLD_SECONDS):
                await self._answered.wait()
                return self._answer
            return None
        finally:
            self.waiting = False


class CallHolder:
    """One server's calls, run as pool tasks so that a call whose server asks the person can outlive the
    request; and the elicitation callback that hands a question to the call it is for."""

    def __init__(self, server: str, in_flight: CallsInFlight) -> None:
        self.server, self._in_flight = server, in_flight
        self.task_group: anyio.abc.TaskGroup | None = None  # the pool's; without it, calls run in the request
        self._running: set[_Running] = set()
        self._held: dict[str, tuple[_Running, float]] = {}  # by hold: the call, and when its hold ends

    async def run(self, call: McpCall, client: Client, arguments: dict[str, Any], limits: Limits) -> Stage:
        """The call's first stage: its end, or the question it waits on (it is then held)."""
        if self.task_group is None:
            with self._in_flight.running():
                return await call.send(client, arguments, limits)
        running = _Running(call)
        self._running.add(running)
        self.task_group.start_soon(self._run, running, client, arguments, limits, name=f"mcp-call:{self.server}")
        return await self._next(running)

    async def answer(self, hold: str, result: ElicitResult) -> Stage | None:
        """The held call's next stage once the server has the person's answer; None when no call waits here.
        A question the server withdrew meanwhile is not answered: the call's next stage is its own doing."""
        self._prune()
        running, _ = self._held.pop(hold, (None, 0.0))
        if running is None:
            return None
        if running.waiting:
            running.answer(result)
        return await self._next(running)

    async def question(self, context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        """The elicitation callback: the question held for the person, or declined when it is not clear which
        call it is for or the call asked too often."""
        self._prune()
        asking = [running for running in self._running if not running.waiting]
        if len(asking) != 1 or asking[0].questions >= QUESTIONS_PER_CALL:
            reason = "too many questions" if len(asking) == 1 else f"{len(asking)} calls running"
            # Not the message: the server's words for the person stay out of the operator's log.
            log.info("mcp_elicitation_declined", server=self.server, mode=params.mode, reason=reason)
            return ElicitResult(action="decline")
        running, hold = asking[0], secrets.token_urlsafe(16)
        self._held[hold] = (running, anyio.current_time() + HOLD_SECONDS)
        try:
            answer = await running.asked(params.model_dump(by_alias=True, mode="json", exclude_none=True), hold)
        except anyio.get_cancelled_exc_class():  # the server withdrew it (or the connection ended)
            log.info("mcp_elicitation_withdrawn", server=self.server)
            raise
        if answer is None:  # nobody answered in time: the server hears the person walked away
            self._held.pop(hold, None)
            running.forget()
            log.info("mcp_elicitation_expired", server=self.server, seconds=HOLD_SECONDS)
            return ElicitResult(action="cancel")
        return answer

    def _prune(self) -> None:
        """Holds past their end: their question was answered "cancel", or withdrawn by the server and not
        answered since. Nobody reads those calls' stages any more."""
        now = anyio.current_time()
        for hold, (running, ends) in list(self._held.items()):
            if ends < now:
                del self._held[hold]
                running.forget()

    async def _run(self, running: _Running, client: Client, arguments: dict[str, Any], limits: Limits) -> None:
        # Closing `stages` when the task ends tells a request still waiting that the call stopped (the pool did).
        with running.stages, self._in_flight.running(), running.scope:
            try:
                running.tell(await running.call.send(client, arguments, limits))
            except Exception as exc:  # boundary: a pool task must not fail the pool; the request raises it
                running.tell(_Failed(exc))
            finally:
                self._running.discard(running)

    async def _next(self, running: _Running) -> Stage:
        try:
            stage = await running.stage_reader.receive()
        except anyio.EndOfStream:  # the call's task ended without a word: the pool stopped it
            running.forget()
            return ConnectionLost(never_ran=False)
        except BaseException:  # the request was cancelled (its client went away): the call stops, as it did
            running.scope.cancel()
            running.forget()
            raise
        if not isinstance(stage, Asked):
            running.forget()
        if isinstance(stage, _Failed):
            raise stage.error
        return stage
