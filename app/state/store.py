"""Where the gateway keeps what it remembers between requests: one small key-value interface, and the
stores behind it (a SQLite file, Redis for replicas, this process's memory), chosen by TOOLBRIDGE_STATE_URL.

Values are opaque bytes to a store. Every store forgets on its own: entries older than the age bound are
never returned, and past the size bound the oldest go first. A store's failure is a `StateStoreError`;
callers carry on without memory rather than fail a request.
"""

import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


class StateStoreError(Exception):
    """The store could not be read or written (a full disk, a locked or damaged file)."""


@dataclass(frozen=True)
class Bounds:
    max_bytes: int
    max_age_seconds: float


class StateStore(Protocol):
    """What conversation memory needs of a store (sqlite.py, redis.py, MemoryStore)."""

    kind: str

    async def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The values of the keys that are there and not too old; the others are left out."""
        ...

    async def put_many(self, items: Mapping[str, bytes]) -> None: ...

    async def problem(self) -> str | None:
        """None when the store works; else why not, for /health."""
        ...

    async def aclose(self) -> None: ...


class MemoryStore:
    """This process's memory: gone at restart. Bounded like the others."""

    kind = "memory"

    def __init__(self, bounds: Bounds) -> None:
        self._bounds = bounds
        self._entries: OrderedDict[str, tuple[bytes, float]] = OrderedDict()
        self._bytes = 0

    async def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        self._forget_old()
        return {key: entry[0] for key in keys if (entry := self._entries.get(key)) is not None}

    async def put_many(self, items: Mapping[str, bytes]) -> None:
        for key, value in items.items():
            old = self._entries.pop(key, None)
            self._bytes += len(value) - (len(old[0]) if old else 0)
            self._entries[key] = (value, time.time())
        while self._bytes > self._bounds.max_bytes and self._entries:
            self._bytes -= len(self._entries.popitem(last=False)[1][0])

    async def problem(self) -> str | None:
        return None

    async def aclose(self) -> None:
        self._entries.clear()
        self._bytes = 0

    def _forget_old(self) -> None:
        cutoff = time.time() - self._bounds.max_age_seconds
        while self._entries and next(iter(self._entries.values()))[1] < cutoff:
            self._bytes -= len(self._entries.popitem(last=False)[1][0])


def parse_state_url(url: str) -> tuple[str, Path | None]:
    """("sqlite", its path) | ("redis", None) | ("memory", None) | ("none", None). SQLite URLs follow
    SQLAlchemy's spelling: three slashes and a relative path, or four slashes for an absolute one; Redis
    URLs are redis-py's (redis://[:password@]host:port/db, rediss:// for TLS).

    Raises:
        ValueError: a URL of another kind, or a SQLite URL without a path.
    """
    text = url.strip()
    if text.lower() in ("none", "off", ""):
        return "none", None
    if text.lower() in ("memory://", "memory"):
        return "memory", None
    if text.lower().startswith(("redis://", "rediss://")):
        return "redis", None
    if text.lower().startswith("sqlite:///"):
        path = text[len("sqlite:///"):]
        if not path:
            raise ValueError("a sqlite:/// URL needs a file path, e.g. sqlite:////var/lib/toolbridge/state.db")
        return "sqlite", Path(path).expanduser()
    raise ValueError(f"must be sqlite:///PATH, redis://HOST:PORT/DB, memory:// or none; got '{url.split('@')[-1]}'")
