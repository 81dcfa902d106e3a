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

Keys are digests; the store holds the calls and results, so it is private (docs/memory.md, Privacy). Nothing
here logs what a message or a result says.
"""

import functools
import hashlib
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
import structlog

from app.chat.context_budget import CHARS_PER_TOKEN, fit_restored
from app.chat.ports import RestoredHistory
from app.chat.trace import RecordedCall, read_back, strip_trace
from app.mcp.results import RenderOptions, omitted_result, recorded_result, shortened_result
from app.openai.schemas import content_text
from app.state.store import ANONYMOUS, StateStore, StateStoreError

log = structlog.get_logger("toolbridge.memory")

ENTRY_VERSION = 1
_ANSWERED = b"1"
_GATEWAY_REPLY = b"gateway"  # under a turn's key: the gateway answered the slash line before it itself
MAX_ENTRY_BYTES = 1024 * 1024  # one turn's calls and results as stored; results are shortened to fit
SHORTEST_RESULT_CHARS = 1000  # what a result shortened to fit an entry keeps at least
DECODE_INLINE_BYTES = 64 * 1024  # found entries past this size are decoded in a worker thread, off the loop
KEYS_OFF_LOOP_CHARS = 1 << 20  # a history past this many characters is keyed in a worker thread
_OWNER_SALT = b"toolbridge conversation memory owner v1"
_OWNER_ROUNDS = 20_000  # a stored owner digest does not give a weak key away cheaply; computed once a key


@dataclass(frozen=True)
class MemoryStores:
    """Where finished turns go (None: TOOLBRIDGE_STATE_URL=none, or the store could not be opened), and
    where mixed turns wait for the client's results: the same store, else this process's memory, because a
    mixed turn cannot be finished without its MCP half."""

    turns: StateStore | None
    pending: StateStore
    failure: str | None = None  # why the configured store could not be opened (memory is off then)

    async def problem(self) -> str | None:
        """None when memory works; else why not, for /health."""
        if self.failure is not None:
            return self.failure
        return await self.turns.problem() if self.turns is not None else None


def memory_owner(api_key: str | None) -> str:
    """Whose memory a request reads and writes: a salted, slow digest of the API key it authenticated with
    (never the key), or ANONYMOUS when the gateway has no keys, where every caller shares one memory."""
    return ANONYMOUS if api_key is None else _owner_digest(api_key)


@functools.lru_cache(maxsize=256)  # only keys the guard accepted get here: as many as are configured
def _owner_digest(api_key: str) -> str:
    return hashlib.pbkdf2_hmac("sha256", api_key.encode(), _OWNER_SALT, _OWNER_ROUNDS).hex()


class ConversationMemory:
    """Conversation memory for one request: `restore` its history, then `remember_*` what it did."""

    def __init__(self, stores: MemoryStores | None, rendering: RenderOptions, chat_id: str | None = None,
                 owner: str = ANONYMOUS) -> None:
        self._stores = stores
        self._rendering = rendering
        self._owner = owner
        self._scope = _digest("owner", owner or "anonymous", "chat", chat_id or "")
        self._chain = _ROOT  # of the history as the client sent it, set by `restore`

    async def restore(self, messages: list[dict[str, Any]],
                      context_tokens: Callable[[], Awaitable[int]] | None = None) -> RestoredHistory:
        """The history with every earlier turn's MCP calls and results in place, the prompts its slash lines
        ran in their place, the gateway's own answers and their lines left out, and traces removed. Stored
        turns are read newest first while they could fit in `context_tokens` (at least one whole entry)."""
        lookups, self._chain = await self._keys_off_loop(messages)
        room = MAX_ENTRY_BYTES
        if context_tokens is not None and lookups and self._stores is not None:
            room = max(room, await context_tokens() * CHARS_PER_TOKEN)
        found = await self._find(lookups, room)
        entries = await _decode_all({key: found[key] for key, _ in lookups.values() if found.get(key)})

        restored: list[dict[str, Any]] = []
        results: list[int] = []
        turns = no_room = 0
        for index, message in enumerate(messages):
            if message.get("role") != "assistant":
                restored.append(message)
                continue
            key, answer_key = lookups[index]
            entry = entries.get(key)
            slash_line = index > 0 and messages[index - 1].get("role") == "user"  # last in `restored`, as sent
            if found.get(key) == _GATEWAY_REPLY:
                if slash_line:
                    restored.pop()
                continue
            if entry is not None:
                turns += 1
                if entry.get("prompt") and slash_line:
                    restored[-1:] = entry["prompt"]
                for part in entry["before"]:
                    _append(restored, results, part)
                restored.append({**message, **entry["message"]})
                for part in entry["after"]:
                    _append(restored, results, part)
                continue
            from_trace = self._from_trace(message)
            if len(from_trace) > 1:
                turns += 1
            elif found.get(key) == b"":
                no_room += 1
            elif key in found:
                log.warning("turn_not_restored", reason="its stored entry could not be read")
            elif answer_key is not None and answer_key in found:
                log.warning("turn_not_restored", reason="the messages before it differ from when it was stored",
                            hint="a client that rewrites earlier messages (a date, RAG context) loses tool memory")
            for part in from_trace:
                _append(restored, results, part)
        if no_room:
            log.info("turn_not_restored", reason="the model's context cannot hold it with the newer turns",
                     turns=no_room, room_bytes=room)
        return RestoredHistory(restored, results, turns)

    async def _keys_off_loop(self, messages: list[dict[str, Any]]) -> tuple[dict[int, tuple[str, str | None]], str]:
        """`_keys`, in a worker thread for a long history (in slices, so the event loop gets its turns)."""
        if _rough_chars(messages) > KEYS_OFF_LOOP_CHARS:
            return await anyio.to_thread.run_sync(self._keys, messages)
        return self._keys(messages)

    def _keys(self, messages: list[dict[str, Any]]) -> tuple[dict[int, tuple[str, str | None]], str]:
        """Each assistant message's key, and its text's key, by index; and the chain of the whole history."""
        lookups: dict[int, tuple[str, str | None]] = {}
        chain = self._chain
        for index, message in enumerate(messages):
            role = message.get("role")
            if role not in _KEYED_ROLES:
                continue
            text = _normal(content_text(message.get("content")), assistant=role == "assistant")
            if role == "assistant":
                ids = _call_ids(message)
                lookups[index] = ((self._mixed_key(chain, ids), None) if ids
                                  else (self._turn_key(chain, text), self._answer_key(text)))
            chain = _digest(chain, role, text)
        return lookups, chain

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

    async def remember_turn(self, rounds: list[dict[str, Any]], final_content: str, shown: str,
                            prompt: Sequence[dict[str, Any]] = ()) -> None:
        """A turn that answered after MCP tools or an MCP prompt: `rounds` (assistant and tool messages), then
        its final text; `shown` is all the text the client was shown, which it will send back; `prompt` the
        prompt's messages that stood in for the slash line."""
        if self._stores is None or self._stores.turns is None or not (rounds or prompt):
            return
        text = _normal(shown, assistant=True)
        entry = await self._bounded_entry(rounds, {"content": final_content}, [], prompt)
        if entry is None:
            return
        await self._put(self._stores.turns, {self._turn_key(self._chain, text): entry,
                                             self._answer_key(text): _ANSWERED})

    async def remember_mixed_turn(
        self, rounds: list[dict[str, Any]], assistant: dict[str, Any], results: list[dict[str, Any]],
        client_call_ids: list[str], prompt: Sequence[dict[str, Any]] = (),
    ) -> None:
        """A turn that called the client's tools and ours: the client gets its calls; when it comes back, the
        assistant message gets all of them again, with our results after it."""
        if self._stores is None:
            return
        message = {"content": assistant["content"], "tool_calls": assistant["tool_calls"]}
        entry = await self._bounded_entry(rounds, message, results, prompt)
        if entry is None:
            return
        await self._put(self._stores.pending, {self._mixed_key(self._chain, client_call_ids): entry})

    async def remember_reply(self, messages: list[dict[str, Any]], text: str) -> None:
        """The gateway answered the slash line that ends `messages` itself: marked, under the key its answer
        will have in the next request's history, so that the line and the answer are left out then."""
        if self._stores is None or self._stores.turns is None:
            return
        _, chain = await self._keys_off_loop(messages)  # a fresh memory's: `restore` never ran on it
        await self._put(self._stores.turns, {self._turn_key(chain, _normal(text, assistant=True)): _GATEWAY_REPLY})

    async def _bounded_entry(self, before: list[dict[str, Any]], message: dict[str, Any],
                             after: list[dict[str, Any]], prompt: Sequence[dict[str, Any]] = ()) -> bytes | None:
        """The entry, within MAX_ENTRY_BYTES (its results shortened if need be), encoded in a worker thread
        when large: a turn's results may be megabytes. None when even shortened results do not fit (logged).
        A prompt that does not fit beside the calls (their results shortened) is left out: the slash line then
        stays as typed."""
        def shorten(text: str, limit: int) -> str:
            return shortened_result(text, limit, self._rendering.result_format)

        kept = _stored_prompt(prompt)
        tries = [kept] if kept else []
        if before or after or not kept:  # without its prompt, an entry is worth keeping for its calls only
            tries.append([])
        for with_prompt in tries:
            parts = [*before, message, *after, *with_prompt]
            if _rough_chars(parts) <= DECODE_INLINE_BYTES:  # a thread hop costs more
                entry = _within_entry_bound(before, message, after, shorten, with_prompt)
            else:
                entry = await anyio.to_thread.run_sync(_within_entry_bound, before, message, after, shorten,
                                                       with_prompt)
            if entry is not None:
                return entry
            if with_prompt:
                log.warning("prompt_not_remembered", reason="the prompt's messages take more than an entry may "
                            "hold", max_entry_bytes=MAX_ENTRY_BYTES)
        if before or after:
            log.warning("turn_not_remembered", reason="its calls take more than an entry may hold even with "
                        "their results shortened", max_entry_bytes=MAX_ENTRY_BYTES)
        return None

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

    async def _find(self, lookups: dict[int, tuple[str, str | None]], room: int) -> dict[str, bytes]:
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

    def _turn_key(self, chain: str, text: bytes) -> str:
        return "turn:" + _digest(self._scope, chain, text)

    def _answer_key(self, text: bytes) -> str:
        return "answer:" + _digest(self._scope, text)

    def _mixed_key(self, chain: str, call_ids: list[str]) -> str:
        return "mixed:" + _digest(self._scope, chain, *sorted(call_ids))


# What a key digests of the history: every message the client sees and sends back but its own tools'
# results (`tool`), which clients do not all send back alike. A system message is in: an entry stored
# under one system prompt is not found under another, so no request can plant turns in other chats.
_KEYED_ROLES = frozenset({"system", "developer", "user", "assistant"})


def _stored_prompt(prompt: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A prompt's messages as an entry keeps them: images described, as a turn's tool images are not kept
    either (a picture would take the entry's room; the model saw it when the prompt ran)."""
    kept = []
    for message in prompt:
        content = message.get("content")
        if isinstance(content, list):
            content = [part if part.get("type") != "image_url" else
                       {"type": "text", "text": "[an image shown with the prompt, not kept]"} for part in content]
        kept.append({**message, "content": content})
    return kept


def _append(messages: list[dict[str, Any]], results: list[int], message: dict[str, Any]) -> None:
    if message.get("role") == "tool":
        results.append(len(messages))
    messages.append(message)


def _call_ids(message: dict[str, Any]) -> list[str]:
    return [str(call["id"]) for call in message.get("tool_calls") or [] if isinstance(call, dict) and call.get("id")]


def _normal(text: str, *, assistant: bool) -> bytes:
    """The text as a key sees it: traces removed and ASCII whitespace ignored, so that the line breaks a trace
    or a client adds or trims between rounds do not matter. Deleted from the encoded bytes in one C pass:
    `"".join(text.split())` took 0.35 s of the event loop for a 40 MB message, 0.04 s this way."""
    kept = strip_trace(text) if assistant else text
    if len(kept) <= _SLICE:
        return kept.encode("utf-8", "surrogatepass").translate(None, _WHITESPACE)
    # In slices, each a short hold of the GIL: run in a thread, this lets the event loop answer in between.
    return b"".join(kept[start:start + _SLICE].encode("utf-8", "surrogatepass").translate(None, _WHITESPACE)
                    for start in range(0, len(kept), _SLICE))


_SLICE = 1 << 20
_WHITESPACE = b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"  # what str.split() splits on below 128


def _digest(*parts: str | bytes) -> str:
    hashed = hashlib.sha256()
    for part in parts:
        # a lone surrogate is the upstream's to refuse, not ours
        data = part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part
        hashed.update(len(data).to_bytes(8, "big"))  # lengths first: ("ab", "c") and ("a", "bc") differ
        hashed.update(data)
    return hashed.hexdigest()


_ROOT = _digest("conversation")  # where every conversation's chain starts


def _encode(before: list[dict[str, Any]], message: dict[str, Any], after: list[dict[str, Any]],
            prompt: list[dict[str, Any]]) -> bytes:
    entry: dict[str, Any] = {"v": ENTRY_VERSION, "before": before, "message": message, "after": after}
    if prompt:  # optional, so that entries without one read the same in every version
        entry["prompt"] = prompt
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode()


def _within_entry_bound(before: list[dict[str, Any]], message: dict[str, Any], after: list[dict[str, Any]],
                        shorten: Callable[[str, int], str], prompt: list[dict[str, Any]] | None = None
                        ) -> bytes | None:
    """The encoded entry if it fits MAX_ENTRY_BYTES; else with every result shortened to an equal share of
    the room (less until it fits, down to SHORTEST_RESULT_CHARS); else None."""
    prompt = prompt or []
    entry = _encode(before, message, after, prompt)
    results = [part for part in (*before, *after)
               if part.get("role") == "tool" and isinstance(part.get("content"), str)]
    if len(entry) <= MAX_ENTRY_BYTES or not results:
        return entry if len(entry) <= MAX_ENTRY_BYTES else None
    rest = len(entry) - sum(len(part["content"].encode()) for part in results)
    limit = max(SHORTEST_RESULT_CHARS, (MAX_ENTRY_BYTES - rest) // len(results))
    while True:
        cut = {id(part): {**part, "content": shorten(part["content"], limit)} for part in results}
        entry = _encode([cut.get(id(p), p) for p in before], message, [cut.get(id(p), p) for p in after], prompt)
        if len(entry) <= MAX_ENTRY_BYTES:
            return entry
        if limit <= SHORTEST_RESULT_CHARS:
            return None
        # Results are escaped again inside the entry, so they take more than their length: cut in proportion.
        limit = max(SHORTEST_RESULT_CHARS, min(limit - 1, int(limit * 0.97 * MAX_ENTRY_BYTES / len(entry))))


def _rough_chars(messages: list[dict[str, Any]]) -> int:
    """About how many characters the messages' texts and call arguments take, without encoding them."""
    total = 0
    for message in messages:
        content = message.get("content")
        total += len(content) if isinstance(content, str) else len(str(content or ""))
        for call in message.get("tool_calls") or []:
            arguments = call.get("function", {}).get("arguments") if isinstance(call, dict) else None
            total += len(arguments) if isinstance(arguments, str) else len(str(arguments or ""))
    return total


async def _decode_all(found: dict[str, bytes]) -> dict[str, dict[str, Any]]:
    """The entries that decode; in a worker thread when they are large, so a restore never stalls the loop."""
    def decode() -> dict[str, dict[str, Any]]:
        return {key: entry for key, value in found.items() if (entry := _decode(value)) is not None}

    if sum(len(value) for value in found.values()) <= DECODE_INLINE_BYTES:
        return decode()
    return await anyio.to_thread.run_sync(decode)


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
    prompt = entry.get("prompt")
    if prompt is not None and not (isinstance(prompt, list) and all(isinstance(m, dict) for m in prompt)):
        entry.pop("prompt")  # the turn's calls still stand; the slash line stays as typed
    return entry
