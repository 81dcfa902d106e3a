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
cancelled, and the call runs to its end unobserved); a call asks at most QUESTIONS_PER_CALL questions; and as a
held call keeps a task in this process and one in the server, at most HELD_PER_KEY calls wait for one key's
answers (on all servers) and HELD_PER_SERVER for answers on one server (`HeldCalls`, the pool's). Past either, a
new question is declined (the server hears so), and when the call ends the model is told why in place of its
result; no call that waits is let go for it. Another replica, or this process after a restart, has no such call:
the model is told to call the tool again.
"""

import contextlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import anyio
import anyio.abc
import structlog
from mcp import Client
from mcp.client import ClientRequestContext
from mcp.types import ElicitRequestParams, ElicitResult

from app.access import CURRENT_SCOPE
from app.chat.ports import InputNeeded
from app.mcp.calling import HOLD_SECONDS, QUESTIONS_PER_CALL, CallEnded, CallsInFlight, ConnectionLost, Limits, McpCall
from app.mcp.results import FailureKind
from app.openai.wire import JSONObject

log = structlog.get_logger("toolbridge.mcp")

_HELD = "toolbridge-held:"  # the state kept with a held call's question: this prefix, then the call's id
# Calls held for a person at once. One person rarely leaves more than a question or two open; 4,000 held by one
# key cost the gateway 189 MB and the server 136 MB (the 2026-11-27 audit's S4), so the bounds are fixed figures.
HELD_PER_KEY = 10  # waiting for the answers of one API key, on all servers (no keys, or the operator's: no bound)
HELD_PER_SERVER = 100  # waiting for anyone's answers on one server


def held_state(state: str | None) -> str | None:
    """The held call's id in a question's state; None for a 2026-era server's own sealed state."""
    return state[len(_HELD):] if state is not None and state.startswith(_HELD) else None


@dataclass(frozen=True)
class Asked:
    """The call's server asked the person `params` (as JSON); the call waits under `hold`."""

    params: JSONObject
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

    def __init__(self, call: McpCall, owner: str) -> None:
        self.call, self.owner = call, owner  # owner: the caller's key (its digest; "" without one of the keys file)
        self.scope = anyio.CancelScope()
        self.questions = 0
        self.waiting = False  # a question of it waits for the person
        self.declined: str | None = None  # why its question was declined for the bounds: what the model is told
        self.stages, self.stage_reader = anyio.create_memory_object_stream[Stage | _Failed](
            QUESTIONS_PER_CALL + 2)
        # Each question's own, made when it is asked (most calls ask none); the answer is read only once set.
        self._answered: anyio.Event
        self._answer: ElicitResult

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

    async def asked(self, params: JSONObject, hold: str) -> ElicitResult | None:
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


class HeldCalls:
    """The calls held for a person's answer in this process, on all the pool's servers: what the bounds count."""

    def __init__(self) -> None:
        self._held: dict[_Running, str] = {}  # each call waiting for an answer, and its server

    def refusal(self, server: str, owner: str) -> str | None:
        """Why a question of `owner`'s call on `server` may not be held now, for the model; None: it may."""
        on_server = sum(held == server for held in self._held.values())
        if on_server >= HELD_PER_SERVER:
            return (f"{on_server} questions from MCP server '{server}' already wait for people's answers, the most "
                    "it may hold at once, so this call's question was declined (the tool was told so). Call the "
                    f"tool again once some are answered or cancelled (each waits up to {HOLD_SECONDS / 60:g} minutes).")
        mine = sorted(held for running, held in self._held.items() if owner and running.owner == owner)
        if len(mine) >= HELD_PER_KEY:
            names = list(dict.fromkeys(mine))
            servers = f"MCP server{'s' * (len(names) > 1)} " + ", ".join(f"'{name}'" for name in names)
            return (f"{len(mine)} questions from {servers} already wait for this person's answer, the most "
                    "one API key may leave open, so this call's question was declined (the tool was told so). Ask "
                    "them to answer or cancel those first, in the chats that asked them (each waits up to "
                    f"{HOLD_SECONDS / 60:g} minutes), then call the tool again.")
        return None

    @contextlib.contextmanager
    def holding(self, running: _Running, server: str) -> Iterator[None]:
        self._held[running] = server
        try:
            yield
        finally:
            del self._held[running]


class CallHolder:
    """One server's calls, run as pool tasks so that a call whose server asks the person can outlive the
    request; and the elicitation callback that hands a question to the call it is for."""

    def __init__(self, server: str, in_flight: CallsInFlight, held: HeldCalls) -> None:
        self.server, self._in_flight, self._held_calls = server, in_flight, held
        self.task_group: anyio.abc.TaskGroup | None = None  # the pool's; without it, calls run in the request
        self._running: set[_Running] = set()
        self._held: dict[str, tuple[_Running, float]] = {}  # by hold: the call, and when its hold ends

    async def run(self, call: McpCall, client: Client, arguments: JSONObject, limits: Limits) -> Stage:
        """The call's first stage: its end, or the question it waits on (it is then held)."""
        if self.task_group is None:
            with self._in_flight.running():
                return await call.send(client, arguments, limits)
        running = _Running(call, CURRENT_SCOPE.get().caller)
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
        """The elicitation callback: the question held for the person; or declined when it is not clear which
        call it is for, the call asked too often, or too many calls wait for people already."""
        self._prune()
        running = self._asking(params)
        if running is None:
            return ElicitResult(action="decline")
        hold = secrets.token_urlsafe(16)
        self._held[hold] = (running, anyio.current_time() + HOLD_SECONDS)
        try:
            with self._held_calls.holding(running, self.server):
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

    def _asking(self, params: ElicitRequestParams) -> _Running | None:
        """The call a question is for, when it may be held; None when it is declined (logged, and the model told
        why when the bounds on held calls were the reason)."""
        asking = [running for running in self._running if not running.waiting]
        reason = "too many questions" if len(asking) == 1 else f"{len(asking)} calls running"
        if len(asking) == 1 and asking[0].questions < QUESTIONS_PER_CALL:
            refusal = self._held_calls.refusal(self.server, asking[0].owner)
            if refusal is None:
                return asking[0]
            reason, asking[0].declined = "too many calls wait for people", refusal
        # Not the message: the server's words for the person stay out of the operator's log.
        log.info("mcp_elicitation_declined", server=self.server, mode=params.mode, reason=reason)
        return None

    def _prune(self) -> None:
        """Holds past their end: their question was answered "cancel", or withdrawn by the server and not
        answered since. Nobody reads those calls' stages any more."""
        now = anyio.current_time()
        for hold, (running, ends) in list(self._held.items()):
            if ends < now:
                del self._held[hold]
                running.forget()

    async def _run(self, running: _Running, client: Client, arguments: JSONObject, limits: Limits) -> None:
        # Closing `stages` when the task ends tells a request still waiting that the call stopped (the pool did).
        with running.stages, self._in_flight.running(), running.scope:
            try:
                ended = await running.call.send(client, arguments, limits)
                if running.declined is not None and isinstance(ended, CallEnded):
                    # Not what the tool made of the decline ("the person declined"): the person never saw it.
                    ended = running.call.fail(FailureKind.QUESTIONS_WAITING, running.declined)
                running.tell(ended)
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
