"""Where the gateway keeps what it remembers between requests: one small key-value interface, and the
stores behind it (a SQLite file, Redis for replicas, this process's memory), chosen by TOOLBRIDGE_STATE_URL.

Values are opaque bytes to a store. A key once written keeps its value: a later write of it is ignored, so
no request can replace what another stored. Every store forgets on its own: entries older than the age bound
are never returned; past an owner's share of the size bound (OWNER_SHARE) that owner's oldest go first, and
past the size bound the oldest of all. A store's failure is a `StateStoreError`; callers carry on without
memory rather than fail a request.
"""

import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

# The URL is a setting; its reading is spelled with the settings, and open.py and the tests find it here too.
from app.settings.vocabularies import parse_state_url as parse_state_url

OWNER_SHARE = 0.25  # of the size bound, what one owner (an API key) may hold: it evicts its own entries, not others'
CLAIMED = b"1"  # the mark `claim` writes
ANONYMOUS = ""  # the owner of entries written without keys: everyone, bound only by the whole store


class StateStoreError(Exception):
    """The store could not be read or written (a full disk, a locked or damaged file)."""


@dataclass(frozen=True)
class Bounds:
    max_bytes: int
    max_age_seconds: float

    def owner_bytes(self, owner: str) -> int | None:
        """What one owner may hold; None for ANONYMOUS (no keys set: one owner, the whole store)."""
        return None if owner == ANONYMOUS else max(1, int(self.max_bytes * OWNER_SHARE))


class StateStore(Protocol):
    """What conversation memory needs of a store (sqlite.py, redis.py, MemoryStore)."""

    kind: str

    async def get_many(self, keys: Sequence[str], max_bytes: int | None = None) -> dict[str, bytes]:
        """The values of the keys that are there and not too old; the others are left out. With `max_bytes`,
        values are taken in the keys' order while their total stays within it; one that would pass it is
        not read, and given as b"" (there, but no room), so a reader never holds more than that."""
        ...

    async def put_many(self, items: Mapping[str, bytes], owner: str = ANONYMOUS) -> None:
        """Stores what is not there yet (a key already there keeps its value), as `owner`'s."""
        ...

    async def claim(self, key: str, owner: str = ANONYMOUS, mark: bytes = CLAIMED) -> bool:
        """Writes `mark` under `key` if nothing is there: True for the one caller that wrote it, in this process or
        any other sharing the store. What runs once only (an approved call) claims its key first."""
        ...

    async def problem(self) -> str | None:
        """None when the store works; else why not, for /health."""
        ...

    async def aclose(self) -> None: ...


class MemoryStore:
    """This process's memory: gone at restart. Bounded like the others."""

    kind = "memory"

    def __init__(self, bounds: Bounds) -> None:
        self._bounds = bounds
        self._entries: OrderedDict[str, tuple[bytes, float, str]] = OrderedDict()  # value, written, owner
        self._bytes = 0
        self._owned: dict[str, int] = {}  # owner: bytes

    async def get_many(self, keys: Sequence[str], max_bytes: int | None = None) -> dict[str, bytes]:
        self._forget_old()
        found: dict[str, bytes] = {}
        room = max_bytes if max_bytes is not None else -1
        for key in keys:
            entry = self._entries.get(key)
            if entry is None or key in found:
                continue
            if max_bytes is not None:
                if len(entry[0]) > room:
                    found[key] = b""
                    continue
                room -= len(entry[0])
            found[key] = entry[0]
        return found

    async def put_many(self, items: Mapping[str, bytes], owner: str = ANONYMOUS) -> None:
        for key, value in items.items():
            if key in self._entries:
                continue
            self._entries[key] = (value, time.time(), owner)
            self._bytes += len(value)
            self._owned[owner] = self._owned.get(owner, 0) + len(value)
        share = self._bounds.owner_bytes(owner)
        if share is not None and self._owned.get(owner, 0) > share:
            for key in [k for k, entry in self._entries.items() if entry[2] == owner]:  # oldest first
                self._forget(key)
                if self._owned.get(owner, 0) <= share:
                    break
        while self._bytes > self._bounds.max_bytes and self._entries:
            self._forget(next(iter(self._entries)))

    async def claim(self, key: str, owner: str = ANONYMOUS, mark: bytes = CLAIMED) -> bool:
        self._forget_old()
        if key in self._entries:
            return False
        await self.put_many({key: mark}, owner)
        return True

    async def problem(self) -> str | None:
        return None

    async def aclose(self) -> None:
        self._entries.clear()
        self._owned.clear()
        self._bytes = 0

    def _forget(self, key: str) -> None:
        value, _, owner = self._entries.pop(key)
        self._bytes -= len(value)
        self._owned[owner] -= len(value)
        if not self._owned[owner]:
            del self._owned[owner]

    def _forget_old(self) -> None:
        cutoff = time.time() - self._bounds.max_age_seconds
        while self._entries and next(iter(self._entries.values()))[1] < cutoff:
            self._forget(next(iter(self._entries)))
