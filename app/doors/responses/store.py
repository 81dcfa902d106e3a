"""Stored responses (`store`, on by default): what `previous_response_id` continues, and what GET and DELETE
`/v1/responses/{id}` read, in the gateway's state store beside conversation memory.

Each response is kept under a key made of its owner (the caller's key, as memory_owner digests it) and its id,
so another key never finds it. Its entry holds the response object, the chat messages its turn added (its new
input, then its answer as a Chat Completions client would send it back: text and the client's tool calls) and
the ids of the responses before it; a continuation reads the whole chain in one read. The earlier turns' MCP
calls and results are not kept here: conversation memory gives them back from the answer's text, as it does for
every door. Entries are written once (the store never overwrites); a deletion is a mark beside the entry.
"""

from dataclasses import dataclass

import anyio.to_thread
import orjson
import structlog

from app.chat import digest
from app.doors.responses.wire import Response, StoredEntry
from app.openai.errors import GatewayError, InvalidRequest
from app.openai.wire import Message
from app.state import StateStore, StateStoreError

log = structlog.get_logger("toolbridge.responses")

MAX_CHAIN = 1000  # responses a conversation may continue through; past it the client sends its input itself
MAX_ENTRY_BYTES = 4 * 1024 * 1024  # one turn's messages (images as data URLs too) and its response
CHAIN_INLINE_BYTES = 256 * 1024  # a chain's entries past this are decoded in a worker thread, off the event loop


class ResponseNotFound(InvalidRequest):
    """A response id this caller has no stored response under (never stored, forgotten, deleted, another's)."""

    status_code = 404
    default_code = "not_found"


@dataclass(frozen=True)
class StoredResponses:
    """One caller's stored responses: `owner` as memory_owner gives it ("" without keys: everyone's)."""

    store: StateStore | None
    owner: str

    def _key(self, response_id: str, kind: str = "response") -> str:
        return f"{kind}:" + digest("responses api", kind, self.owner, response_id)  # the kind, for the store's log

    async def conversation(self, response_id: str, max_bytes: int) -> tuple[list[str], list[Message]]:
        """The ids of the chain that ends with `response_id`, and its conversation: every turn's messages, read
        only while the chain's entries hold `max_bytes` at most (what one request may carry: a conversation
        continued is never more work than one sent whole).

        Raises:
            InvalidRequest: the response is not stored for this caller, an earlier one of its chain is gone, or
                the chain holds more than `max_bytes`.
        """
        entry = await self._entry(response_id, param="previous_response_id")
        chain = [*entry["chain"], response_id]
        if len(chain) > MAX_CHAIN:
            raise InvalidRequest(f"This conversation has passed {MAX_CHAIN} responses; send its input items "
                                 "instead of previous_response_id.", param="previous_response_id")
        found = await self._read([self._key(earlier) for earlier in entry["chain"]], max_bytes)
        values: list[bytes] = []
        for earlier in entry["chain"]:
            value = found.get(self._key(earlier))
            if value == b"":  # there, but past the bound: not read
                raise InvalidRequest(f"This conversation holds more than {max_bytes:,} bytes, what one request may "
                                     "carry; send its input items instead of previous_response_id.",
                                     param="previous_response_id")
            if not value:
                raise InvalidRequest(f"An earlier response of this conversation ({earlier!r}) is no longer stored.",
                                     param="previous_response_id", code="previous_response_not_found")
            values.append(value)
        if sum(map(len, values)) > CHAIN_INLINE_BYTES:  # up to the body limit: 0.1 s of decoding
            return chain, [*await anyio.to_thread.run_sync(_messages, values), *entry["messages"]]
        return chain, [*_messages(values), *entry["messages"]]

    async def response(self, response_id: str) -> Response:
        """The stored response object. Raises ResponseNotFound."""
        return (await self._entry(response_id, param=None))["response"]

    async def keep(self, response: Response, chain: list[str], messages: list[Message]) -> None:
        """Stores a finished response with its turn's messages; a store that fails or an entry past the bound is
        logged, and the answer goes on (its id is then simply not found later)."""
        if self.store is None:
            return
        value = orjson.dumps({"chain": chain, "messages": messages, "response": response})
        if len(value) > MAX_ENTRY_BYTES:
            log.warning("response_not_stored", reason="too large", bytes=len(value), limit=MAX_ENTRY_BYTES)
            return
        try:
            await self.store.put_many({self._key(response["id"]): value}, owner=self.owner)
        except StateStoreError as exc:
            log.warning("response_not_stored", reason=str(exc))

    async def delete(self, response_id: str) -> None:
        """Marks the response deleted (the store keeps what it wrote). Raises ResponseNotFound."""
        await self._entry(response_id, param=None)
        assert self.store is not None  # _entry found it there
        try:
            await self.store.claim(self._key(response_id, "deleted"), owner=self.owner)
        except StateStoreError as exc:
            log.warning("response_not_deleted", reason=str(exc))
            raise StoreUnavailable("The response could not be deleted now; try again.") from None

    async def _entry(self, response_id: str, *, param: str | None) -> StoredEntry:
        key, mark = self._key(response_id), self._key(response_id, "deleted")
        found = await self._read([key, mark])
        if not found.get(key) or mark in found:
            what = "Previous response" if param else "Response"
            if param:
                raise InvalidRequest(f"{what} with id {response_id!r} not found.", param=param,
                                     code="previous_response_not_found")
            raise ResponseNotFound(f"{what} with id {response_id!r} not found.")
        return _stored(found[key])

    async def _read(self, keys: list[str], max_bytes: int | None = None) -> dict[str, bytes]:
        if self.store is None or not keys:
            return {}
        try:
            return await self.store.get_many(keys, max_bytes)
        except StateStoreError as exc:
            log.warning("responses_not_read", reason=str(exc))
            raise StoreUnavailable("Stored responses cannot be read now; try again.") from None


def _messages(entries: list[bytes]) -> list[Message]:
    return [message for value in entries for message in _stored(value)["messages"]]


def _stored(value: bytes) -> StoredEntry:
    """An entry as keep wrote it: only keep writes under a response's key (made of its owner and id, never
    overwritten), so what it reads back has the shape it was written in, unchecked again."""
    entry: StoredEntry = orjson.loads(value)
    return entry


class StoreUnavailable(GatewayError):
    """The state store failed (its reason goes to the log, not to the client): the request may succeed later."""

    status_code = 503
    default_code = "store_unavailable"
