"""Conversation memory: the MCP calls and results of earlier turns, given back to the model.

Clients keep only what they were shown of a turn: its text, and perhaps a trace. Before the upstream sees
a conversation, every earlier assistant turn toolbridge answered with MCP tools gets its real shape back:
the assistant messages with `tool_calls`, the `tool` messages with the results the model read then, and
the final text. Two sources, the store first:

- **The store.** When a request ends after MCP rounds, they are stored under a key the next request can
  compute from its own history: a digest of the turn's visible text (traces removed, whitespace ignored)
  with every user and assistant message before it, and Open WebUI's chat id when it sends one. A turn that
  handed the client its own tool calls (a mixed turn) is keyed by those calls' ids instead, since the
  client sends them back.
- **The trace.** A `details` trace in the history records each call with its result (`trace.read_back`).

Keys are digests; the store holds the calls and results, so it is private (README, Privacy). Nothing
here logs what a message or a result says.
"""

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import structlog

from app.context_budget import fit_restored
from app.mcp.results import RenderOptions, omitted_result, recorded_result, shortened_result
from app.openai.schemas import content_text
from app.ports import RestoredHistory
from app.state.store import StateStore, StateStoreError
from app.trace import RecordedCall, read_back, strip_trace

log = structlog.get_logger("toolbridge.memory")

ENTRY_VERSION = 1
_ANSWERED = b"1"


@dataclass(frozen=True)
class MemoryStores:
    """Where finished turns go (None: TOOLBRIDGE_STATE_URL=none, or the store could not be opened), and
    where mixed turns wait for the client's results: the same store, else this process's memory, because a
    mixed turn cannot be finished without its MCP half."""

    turns: StateStore | None
    pending: StateStore


class ConversationMemory:
    """Conversation memory for one request: `restore` its history, then `remember_*` what it did."""

    def __init__(self, stores: MemoryStores | None, rendering: RenderOptions, chat_id: str | None = None) -> None:
        self._stores = stores
        self._rendering = rendering
        self._chat = chat_id or ""
        self._chain = _ROOT  # of the history as the client sent it, set by `restore`

    async def restore(self, messages: list[dict[str, Any]]) -> RestoredHistory:
        """The history with every earlier turn's MCP calls and results in place, and traces removed."""
        lookups: dict[int, tuple[str, str | None]] = {}  # message index: its key, and its text's key
        chain = self._chain
        for index, message in enumerate(messages):
            role = message.get("role")
            if role not in ("user", "assistant"):
                continue
            text = _normal(content_text(message.get("content")), assistant=role == "assistant")
            if role == "assistant":
                ids = _call_ids(message)
                lookups[index] = ((self._mixed_key(chain, ids), None) if ids
                                  else (self._turn_key(chain, text), self._answer_key(text)))
            chain = _digest(chain, role, text)
        self._chain = chain
        found = await self._find(lookups)

        restored: list[dict[str, Any]] = []
        results: list[int] = []
        turns = 0
        for index, message in enumerate(messages):
            if message.get("role") != "assistant":
                restored.append(message)
                continue
            key, answer_key = lookups[index]
            entry = _decode(found.get(key))
            if entry is not None:
                turns += 1
                for part in entry["before"]:
                    _append(restored, results, part)
                restored.append({**message, **entry["message"]})
                for part in entry["after"]:
                    _append(restored, results, part)
                continue
            from_trace = self._from_trace(message)
            if len(from_trace) > 1:
                turns += 1
            elif key in found:
                log.warning("turn_not_restored", reason="its stored entry could not be read")
            elif answer_key is not None and answer_key in found:
                log.warning("turn_not_restored", reason="the messages before it differ from when it was stored",
                            hint="a client that rewrites earlier messages (a date, RAG context) loses tool memory")
            for part in from_trace:
                _append(restored, results, part)
        return RestoredHistory(restored, results, turns)

    def fit(self, history: RestoredHistory, allowance: int) -> list[dict[str, Any]]:
        """The restored history within `allowance` characters: the oldest restored results shortened (the
        envelope's own cut), then left out with a note; the rest untouched."""
        fitted = fit_restored(history.messages, history.restored_results, allowance,
                              lambda text, limit: shortened_result(text, limit, self._rendering.result_format),
                              omitted_result(self._rendering.result_format))
        if fitted.shortened or fitted.dropped:
            log.info("restored_results_fitted", shortened=fitted.shortened, left_out=fitted.dropped,
                     allowance_chars=allowance)
        return fitted.messages

    async def remember_turn(self, rounds: list[dict[str, Any]], final_content: str, shown: str) -> None:
        """A turn that ran MCP tools and answered: `rounds` (assistant and tool messages), then its final text;
        `shown` is all the text the client was shown, which it will send back."""
        if self._stores is None or self._stores.turns is None or not rounds:
            return
        text = _normal(shown, assistant=True)
        entry = _encode(rounds, {"content": final_content}, [])
        await self._put(self._stores.turns, {self._turn_key(self._chain, text): entry,
                                             self._answer_key(text): _ANSWERED})

    async def remember_mixed_turn(
        self, rounds: list[dict[str, Any]], assistant: dict[str, Any], results: list[dict[str, Any]],
        client_call_ids: list[str],
    ) -> None:
        """A turn that called the client's tools and ours: the client gets its calls; when it comes back, the
        assistant message gets all of them again, with our results after it."""
        if self._stores is None:
            return
        entry = _encode(rounds, {"content": assistant["content"], "tool_calls": assistant["tool_calls"]}, results)
        await self._put(self._stores.pending, {self._mixed_key(self._chain, client_call_ids): entry})

    def _from_trace(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        """An assistant message with no stored entry: the rounds its details trace recorded, then its text;
        or the message with its trace removed."""
        content = message.get("content")
        if not isinstance(content, str) or not content:
            return [message]
        parts = read_back(content)
        if parts is None:
            stripped = strip_trace(content)
            return [message if stripped == content else {**message, "content": stripped}]
        own = set(_call_ids(message))  # a mixed turn's own calls, if it kept them
        messages: list[dict[str, Any]] = []
        text = ""
        for part in parts:
            if isinstance(part, str):
                text += part
                continue
            recorded = [call for call in part if call.id not in own]
            if not recorded:
                continue
            calls = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                     for c in recorded]
            messages.append({"role": "assistant", "content": strip_trace(text).strip(), "tool_calls": calls})
            messages += [{"role": "tool", "tool_call_id": c.id, "content": self._recorded(c)} for c in recorded]
            text = ""
        return [*messages, {**message, "content": strip_trace(text).strip()}]

    def _recorded(self, call: RecordedCall) -> str:
        return recorded_result(call.result, call.failed, call.cut, self._rendering)

    async def _find(self, lookups: dict[int, tuple[str, str | None]]) -> dict[str, bytes]:
        if self._stores is None or not lookups:
            return {}
        keys = [key for pair in lookups.values() for key in pair if key is not None]
        stores = [self._stores.pending]
        if self._stores.turns is not None and self._stores.turns is not self._stores.pending:
            stores.insert(0, self._stores.turns)
        found: dict[str, bytes] = {}
        for store in stores:
            try:
                found |= await store.get_many(keys)
            except StateStoreError as exc:
                log.warning("memory_unavailable", store=store.kind, error=str(exc),
                            consequence="earlier turns' tool calls are not restored for this request")
        return found

    async def _put(self, store: StateStore, items: dict[str, bytes]) -> None:
        try:
            await store.put_many(items)
        except StateStoreError as exc:
            log.warning("memory_unavailable", store=store.kind, error=str(exc),
                        consequence="this turn's tool calls will not be restored later")

    def _turn_key(self, chain: str, text: str) -> str:
        return "turn:" + _digest(self._chat, chain, text)

    def _answer_key(self, text: str) -> str:
        return "answer:" + _digest(self._chat, text)

    def _mixed_key(self, chain: str, call_ids: list[str]) -> str:
        return "mixed:" + _digest(self._chat, chain, *sorted(call_ids))


def _append(messages: list[dict[str, Any]], results: list[int], message: dict[str, Any]) -> None:
    if message.get("role") == "tool":
        results.append(len(messages))
    messages.append(message)


def _call_ids(message: dict[str, Any]) -> list[str]:
    return [str(call["id"]) for call in message.get("tool_calls") or [] if isinstance(call, dict) and call.get("id")]


def _normal(text: str, *, assistant: bool) -> str:
    """The text as a key sees it: traces removed and whitespace ignored, so that the line breaks a trace or
    a client adds or trims between rounds do not matter."""
    return "".join((strip_trace(text) if assistant else text).split())


def _digest(*parts: str) -> str:
    hashed = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")  # a lone surrogate is the upstream's to refuse, not ours
        hashed.update(len(data).to_bytes(8, "big"))  # lengths first: ("ab", "c") and ("a", "bc") differ
        hashed.update(data)
    return hashed.hexdigest()


_ROOT = _digest("conversation")  # where every conversation's chain starts


def _encode(before: list[dict[str, Any]], message: dict[str, Any], after: list[dict[str, Any]]) -> bytes:
    entry = {"v": ENTRY_VERSION, "before": before, "message": message, "after": after}
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode()


def _decode(value: bytes | None) -> dict[str, Any] | None:
    if value is None or value == _ANSWERED:
        return None
    try:
        entry = json.loads(value)
    except ValueError:
        return None
    if not isinstance(entry, dict) or entry.get("v") != ENTRY_VERSION:
        return None
    if not (isinstance(entry.get("before"), list) and isinstance(entry.get("message"), dict)
            and isinstance(entry.get("after"), list)):
        return None
    return entry
