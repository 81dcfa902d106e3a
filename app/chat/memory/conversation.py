"""Conversation memory: the MCP calls and results of earlier turns, given back to the model.

Clients keep only what they were shown of a turn: its text, and perhaps a trace. Before the upstream sees
a conversation, every earlier assistant turn toolbridge answered with MCP tools gets its real shape back:
the assistant messages with `tool_calls`, the `tool` messages with the results the model read then, and
the final text. Two sources, the store first:

- **The store.** When a request ends after MCP rounds, they are stored under a key the next request can
  compute from its own history: a digest of the turn's visible text (traces removed, whitespace ignored)
  with every system, user and assistant message before it, scoped to the caller (a digest of the API key
  the request came with, or "anonymous" without keys) and to Open WebUI's chat id when it sends one. A
  turn that handed the client its own tool calls (a mixed turn) is keyed by those calls' ids instead,
  since the client sends them back. Another key, or a different system message, never finds the entry;
  a key once written keeps its entry (stores never overwrite).
- **The trace.** A `details` trace in the history records each call with its result (`trace.read_back`).

Slash commands (slash_commands.py) leave the client a slash line where the model saw something else. A
turn that ran an MCP prompt keeps the prompt's messages in its entry (written even when no tool ran), and
they stand in for the slash line before it again. A slash line the gateway answered itself (`/prompts`, a
missing argument) gets a mark under its answer's key, like a turn's, and the line and the answer are left
out: the model never saw them, and the gateway's words are no turn of the model's to imitate. The mark is
in the store, not in the text, so no client can make the gateway drop a message, and a model's answer that
reads like the gateway's stays.

Bounds: an entry holds at most MAX_ENTRY_BYTES (past it the turn's results are shortened to fit, and a
turn that still does not fit is not kept); a restore reads, newest turns first, only what the model's
context could hold (at least one whole entry), and decodes it in a worker thread when it is large.

Keys are digests; the store (sealed: app/state/seal.py) holds the calls and results, so it is private. Nothing
here logs what a message or a result says. How a conversation is recognised is in keys.py, what an entry
holds in entry.py, and the history's rewrite in restore.py.
"""

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar, TypeVarTuple

import anyio.to_thread
import structlog

from app.chat.answer import RecordedCall
from app.chat.asking import Answer, Grant, Reply, Scope, decided_by, grants_for
from app.chat.memory.entry import (
    ANSWERED,
    GATEWAY_REPLY,
    MAX_ENTRY_BYTES,
    StoredMessage,
    Waiting,
    bounded_entry,
    decode_all,
    rough_chars,
)
from app.chat.memory.grant_book import GrantBook
from app.chat.memory.keys import ROOT, ConversationKeys, Lookups, memory_owner, normal
from app.chat.memory.restore import rewrite_history
from app.chat.offer import CHARS_PER_TOKEN, fit_restored
from app.chat.ports import InputNeeded, RestoredHistory, WaitingTurn
from app.openai.accumulate import ToolCall
from app.openai.result_format import RenderOptions, omitted_result, recorded_result, shortened_result
from app.openai.wire import Message
from app.ops.waiting_rounds import WaitingCall, WaitingRounds, verdict_key
from app.state import ANONYMOUS, StateStore, StateStoreError

__all__ = ["ConversationMemory", "MemoryStores", "memory_owner"]

log = structlog.get_logger("toolbridge.memory")

T = TypeVar("T")
Ts = TypeVarTuple("Ts")
# A history past either is keyed and rewritten in a worker thread: both take about 10 µs a message on the loop.
KEYS_OFF_LOOP_CHARS = 1 << 20
KEYS_OFF_LOOP_MESSAGES = 500


@dataclass(frozen=True)
class MemoryStores:
    """Where finished turns go (None: TOOLBRIDGE_STATE_URL=none, or the store could not be opened), and
    where mixed turns wait for the client's results: the same store, else this process's memory, because a
    mixed turn cannot be finished without its MCP half."""

    turns: StateStore | None
    pending: StateStore
    failure: str | None = None  # why the configured store could not be opened (memory is off then)
    waiting: WaitingRounds | None = None  # the rounds waiting for a yes, for the status page
    grants: GrantBook | None = None  # the person's answers that hold beyond their calls (None: each call asks)

    async def problem(self) -> str | None:
        """None when memory works; else why not, for /health."""
        if self.failure is not None:
            return self.failure
        return await self.turns.problem() if self.turns is not None else None


class ConversationMemory:
    """Conversation memory for one request: `restore` its history, then `remember_*` what it did."""

    def __init__(self, stores: MemoryStores | None, rendering: RenderOptions, chat_id: str | None = None,
                 owner: str = ANONYMOUS) -> None:
        self._stores = stores
        self._rendering = rendering
        self._owner = owner
        self._keys = ConversationKeys(owner, chat_id)
        self._chat_id = chat_id
        self._chain = ROOT  # of the history as the client sent it, set by `restore`
        self._sent: Sequence[Message] = ()  # the history as the client sent it, set by `restore`
        self._lookups: Lookups = {}  # its assistant messages' keys, set by `restore`
        self._conversation: str | None = None  # Open WebUI's chat, for "for this chat": asked only with a chat id

    async def restore(self, messages: Sequence[Message],
                      context_tokens: Callable[[], Awaitable[int]] | None = None) -> RestoredHistory:
        """The history with every earlier turn's MCP calls and results in place, the prompts its slash lines
        ran in their place, the gateway's own answers and their lines left out, and traces removed. Stored
        turns are read newest first while they could fit in `context_tokens` (at least one whole entry)."""
        long = _long(messages)
        lookups, self._chain = await _off_loop(long, self._keys.lookups, messages, ROOT)
        self._sent, self._lookups = messages, lookups
        context_chars = None
        if context_tokens is not None and lookups and self._stores is not None:
            context_chars = await context_tokens() * CHARS_PER_TOKEN
        room = _read_room(context_chars)
        found = await self._find(lookups, room)
        entries = await decode_all({key: found[key] for key, _ in lookups.values() if found.get(key)})
        history, no_room = await _off_loop(long, rewrite_history, messages, lookups, found, entries, self._recorded)
        if no_room:
            log.info("turn_not_restored", reason="the model's context cannot hold it with the newer turns",
                     turns=no_room, room_bytes=room)
        return history

    async def _chat_marks(self, granting: bool = False) -> list[str]:
        """What tells this chat for a grant "for this chat": the exchanges in its history that gave one (`granting`:
        the one that ends it), and with Open WebUI's chat id, the chat."""
        since = len(self._sent) - 2 if granting else 0
        marks = self._keys.exchanges(self._sent, self._lookups, since)
        if self._chat_id:
            marks.append(await self._conversation_key())
        return [self._keys.chat_mark(mark) for mark in marks]

    async def _conversation_key(self) -> str:
        """Open WebUI's chat's identity for "for this chat": only a request whose model called a tool that asks first
        needs it; a long first message is read in a worker thread, as the history's keys are."""
        if self._conversation is None:
            first = self._sent[:next((i + 1 for i, m in enumerate(self._sent) if m.get("role") == "user"),
                                     len(self._sent))]
            self._conversation = conversation = await _off_loop(_long(first), self._keys.conversation, first)
            return conversation
        return self._conversation

    def fit(self, history: RestoredHistory, allowance: int) -> Sequence[Message]:
        """The restored history within `allowance` characters: the oldest restored results shortened (the
        envelope's own cut), then left out with a note; the rest untouched."""
        fitted = fit_restored(history.messages, history.restored_results, allowance, self._shorten,
                              omitted_result(self._rendering.result_format))
        if fitted.shortened or fitted.dropped:
            log.info("restored_results_fitted", shortened=fitted.shortened, left_out=fitted.dropped,
                     allowance_chars=allowance)
        return fitted.messages

    async def remember_turn(self, rounds: list[Message], final_content: str, shown: str,
                            prompt: Sequence[Message] = ()) -> None:
        """A turn that answered after MCP tools or an MCP prompt: `rounds` (assistant and tool messages), then
        its final text; `shown` is all the text the client was shown, which it will send back; `prompt` the
        prompt's messages that stood in for the slash line."""
        if self._stores is None or self._stores.turns is None or not (rounds or prompt):
            return
        text = normal(shown, assistant=True)
        entry = await bounded_entry(rounds, {"content": final_content}, [], prompt, self._shorten)
        if entry is None:
            return
        turn_key, answer_key = self._keys.answered_turn(self._chain, text)
        await self._put(self._stores.turns, {turn_key: entry, answer_key: ANSWERED})

    async def remember_mixed_turn(
        self, rounds: list[Message], assistant: Message, results: list[Message],
        client_call_ids: list[str], prompt: Sequence[Message] = (),
    ) -> None:
        """A turn that called the client's tools and ours: the client gets its calls; when it comes back, the
        assistant message gets all of them again, with our results after it."""
        if self._stores is None:
            return
        message: StoredMessage = {"content": assistant.get("content"), "tool_calls": assistant.get("tool_calls", [])}
        entry = await bounded_entry(rounds, message, results, prompt, self._shorten)
        if entry is None:
            return
        await self._put(self._stores.pending, {self._keys.mixed(self._chain, client_call_ids): entry})

    async def remember_waiting_turn(
        self, rounds: list[Message], assistant: Message, asks: list[str], shown: str,
        prompt: Sequence[Message] = (), *, servers: Mapping[str, str | None] | None = None,
        reference: str = "", after: Sequence[Message] = (), inputs: Mapping[str, InputNeeded] | None = None,
        continues: bool = False,
    ) -> None:
        """A turn whose calls wait for the person's yes: kept where mixed turns wait (with replicas, in the
        shared store), under the key its question will have in the next request's history; and listed for the
        status page, its asked calls with their `servers` (by tool name) and the question's `reference`. A round
        whose calls wait for answers to the server's questions keeps them (`inputs`), and the results of its calls
        that finished (`after`); the status page does not list it. `continues`: the calls are the waiting turn's
        before, asking again (`assistant` holds just them; `rounds` the results of the others)."""
        if self._stores is None:
            return
        message: StoredMessage = {"content": assistant.get("content"), "tool_calls": assistant.get("tool_calls", [])}
        waiting: Waiting = {"asks": asks, "at": time.time()}
        if continues:
            waiting["continues"] = True
        if inputs:
            waiting["inputs"] = {call_id: {"requests": needed.requests, "state": needed.state}
                                 for call_id, needed in inputs.items()}
        entry = await bounded_entry(rounds, message, list(after), prompt, self._shorten, waiting=waiting)
        if entry is None:
            return
        key = self._keys.turn(self._chain, normal(shown, assistant=True))
        await self._put(self._stores.pending, {key: entry})
        if self._stores.waiting is not None and not inputs:
            named = [(str(c["function"]["name"]), str(c["function"]["arguments"]))
                     for c in assistant.get("tool_calls", []) if c["id"] in asks]
            self._stores.waiting.add(key, self._owner, [WaitingCall(name, (servers or {}).get(name), arguments)
                                                        for name, arguments in named], reference)

    async def verdict(self, waiting: WaitingTurn) -> Reply | None:
        """The verdict the status page wrote for the waiting turn (YES or NO), if any. This request takes the
        turn up, so it leaves the page's list; and it marks the verdict's place, so that a verdict given on the
        page after it (on any replica) is refused rather than said to have decided."""
        if self._stores is None:
            return None
        if self._stores.waiting is not None:
            self._stores.waiting.taken_up(waiting.key)
        key = verdict_key(waiting.key)
        try:
            if await self._stores.pending.claim(key, self._owner):
                return None  # the message came first
            found = await self._stores.pending.get_many([key])
        except StateStoreError as exc:
            log.warning("memory_unavailable", store=self._stores.pending.kind, error=str(exc),
                        consequence="a verdict from the status page is not read: the person's message decides")
            return None
        return {b"approve": Reply.YES, b"deny": Reply.NO}.get(found.get(key, b""))

    async def claim(self, waiting: WaitingTurn) -> bool:
        """True once per waiting turn, in every process sharing the store; False after, or when the store
        cannot say (then nothing runs: a yes that may have acted already never acts twice)."""
        if self._stores is None:
            return False
        try:
            return await self._stores.pending.claim(self._keys.resumed(waiting.key), self._owner)
        except StateStoreError as exc:
            log.warning("memory_unavailable", store=self._stores.pending.kind, error=str(exc),
                        consequence="a waiting call is not run, since it cannot be known to run once")
            return False

    async def granted(self, calls: Sequence[ToolCall], server_of: Callable[[str], str | None]) -> dict[str, Grant]:
        """By call id, the grant that decides each call a grant covers (app/chat/asking/grants.py); the others ask.
        A vault that cannot be read decides nothing: the person is asked rather than a call run unasked."""
        book = self._stores.grants if self._stores is not None else None
        if book is None or not calls:
            return {}
        try:
            grants = await book.of(self._owner)
        except StateStoreError as exc:
            log.warning("grants_unavailable", error=str(exc), consequence="the person is asked about every call")
            return {}
        if not grants:
            return {}
        chats = await self._chat_marks() if any(grant.chats for grant in grants) else []
        now = book.clock()
        decided = {call.id: decided_by(grants, server_of(call.name) or "", call.name, call.arguments, chats, now)
                   for call in calls}
        return {call_id: grant for call_id, grant in decided.items() if grant is not None}

    async def grant(self, answer: Answer, asked: Sequence[ToolCall], server_of: Callable[[str], str | None]) -> None:
        """The person's answer (the message that ends the history) holds beyond its calls: kept as grants of this key
        for their tools (none for an answer about these calls only)."""
        book = self._stores.grants if self._stores is not None else None
        if book is None or answer.scope is Scope.CALL:
            return
        chats = await self._chat_marks(granting=True) if answer.scope is Scope.CHAT else []
        grants = grants_for(answer, [(server_of(call.name) or "", call.name) for call in asked], chats, "",
                            book.clock())
        try:
            await book.add(self._owner, grants)
        except StateStoreError as exc:
            log.warning("grants_unavailable", error=str(exc), consequence="the answer holds for these calls only")

    async def remember_reply(self, messages: Sequence[Message], text: str) -> None:
        """The gateway answered the slash line that ends `messages` itself: marked, under the key its answer
        will have in the next request's history, so that the line and the answer are left out then."""
        if self._stores is None or self._stores.turns is None:
            return
        _, chain = await _off_loop(_long(messages), self._keys.lookups, messages, ROOT)
        await self._put(self._stores.turns, {self._keys.turn(chain, normal(text, assistant=True)): GATEWAY_REPLY})

    def _shorten(self, text: str, limit: int) -> str:
        return shortened_result(text, limit, self._rendering.result_format)

    def _recorded(self, call: RecordedCall) -> str:
        return recorded_result(call.result, call.failed, call.cut, self._rendering)

    async def _find(self, lookups: Lookups, room: int) -> dict[str, bytes]:
        """The stored values of the lookups, within `room` bytes in all: answers' marks (a byte each) first,
        then turns, the newest first, since a context that cannot hold every turn keeps the latest."""
        if self._stores is None or not lookups:
            return {}
        pairs = list(lookups.values())
        keys = [answer for _, answer in pairs if answer is not None] + [key for key, _ in reversed(pairs)]
        stores = [self._stores.pending]
        if self._stores.turns is not None and self._stores.turns is not self._stores.pending:
            stores.insert(0, self._stores.turns)
        found: dict[str, bytes] = {}
        for store in stores:
            try:
                for key, value in (await store.get_many(keys, max(room, 0))).items():
                    if value or key not in found:  # read elsewhere beats "no room" here
                        found[key] = value
                    room -= len(value)
            except StateStoreError as exc:
                log.warning("memory_unavailable", store=store.kind, error=str(exc),
                            consequence="earlier turns' tool calls are not restored for this request")
        return found

    async def _put(self, store: StateStore, items: dict[str, bytes]) -> None:
        try:
            await store.put_many(items, self._owner)
        except StateStoreError as exc:
            log.warning("memory_unavailable", store=store.kind, error=str(exc),
                        consequence="this turn's tool calls will not be restored later")


def _read_room(context_chars: int | None) -> int:
    """How many bytes of entries a restore reads: what the model's context could hold, at least one whole
    entry (without a context size, just that)."""
    return MAX_ENTRY_BYTES if context_chars is None else max(MAX_ENTRY_BYTES, context_chars)


def _long(messages: Sequence[Message]) -> bool:
    """Whether a history is long enough to be keyed and rewritten in a worker thread: there, the event loop gets
    its turns in between (the keys' text is read in slices for that)."""
    return len(messages) > KEYS_OFF_LOOP_MESSAGES or rough_chars(messages) > KEYS_OFF_LOOP_CHARS


async def _off_loop(long: bool, work: Callable[[*Ts], T], *args: *Ts) -> T:
    return await anyio.to_thread.run_sync(work, *args) if long else work(*args)
