"""The default store: one SQLite file (stdlib sqlite3) in WAL mode, so memory survives a restart.

The file and its WAL companions are readable by their owner only: they hold tool results. Calls run in a
worker thread, one at a time, so a slow disk never stalls the event loop.
"""

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Self, TypeVar

import anyio.to_thread

from app.state.store import Bounds, StateStoreError

SCHEMA_VERSION = 1
PRUNE_EVERY_SECONDS = 60.0
EVICT_TO = 0.9  # past the size bound, forget down to this share of it, not one entry per write
_MAX_KEYS_PER_QUERY = 500
T = TypeVar("T")


class SqliteStore:
    kind = "sqlite"

    def __init__(self, path: Path, bounds: Bounds) -> None:
        self.path = path
        self._bounds = bounds
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._bytes = 0
        self._pruned_at = 0.0

    async def __aenter__(self) -> Self:
        await self._run(self._open)
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        return await self._run(lambda: self._get_many(keys))

    async def put_many(self, items: Mapping[str, bytes]) -> None:
        await self._run(lambda: self._put_many(items))

    async def problem(self) -> str | None:
        return None  # a failing file is found at opening, and each failed read or write is logged

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self._close)

    async def _run(self, work: Callable[[], T]) -> T:
        try:
            return await anyio.to_thread.run_sync(self._locked, work)
        except sqlite3.Error as exc:
            raise StateStoreError(f"{self.path}: {exc}") from exc
        except OSError as exc:
            raise StateStoreError(f"{self.path}: {exc.strerror or exc}") from exc

    def _locked(self, work: Callable[[], T]) -> T:
        with self._lock:
            return work()

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Created owner-only before SQLite opens it; its -wal and -shm files take the same mode.
        os.close(os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600))
        os.chmod(self.path, 0o600)
        connection = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=5.0)
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")  # WAL keeps the file sound; a crash may lose the last turn
            connection.execute("CREATE TABLE IF NOT EXISTS entries "
                               "(key TEXT PRIMARY KEY, value BLOB NOT NULL, stored_at REAL NOT NULL)")
            connection.execute("CREATE INDEX IF NOT EXISTS entries_by_age ON entries (stored_at)")
            connection.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except BaseException:
            connection.close()
            raise
        self._connection = connection
        self._prune()

    def _close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def _db(self) -> sqlite3.Connection:
        if self._connection is None:
            raise sqlite3.ProgrammingError("the store is closed")
        return self._connection

    def _get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        cutoff = time.time() - self._bounds.max_age_seconds
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), _MAX_KEYS_PER_QUERY):
            batch = unique[start:start + _MAX_KEYS_PER_QUERY]
            marks = ",".join("?" * len(batch))
            rows = self._db().execute(
                f"SELECT key, value FROM entries WHERE stored_at >= ? AND key IN ({marks})", (cutoff, *batch)
            )
            found.update((key, bytes(value)) for key, value in rows)
        return found

    def _put_many(self, items: Mapping[str, bytes]) -> None:
        db = self._db()
        now = time.time()
        db.execute("BEGIN IMMEDIATE")
        try:
            for key, value in items.items():
                old = db.execute("SELECT length(value) FROM entries WHERE key = ?", (key,)).fetchone()
                db.execute("INSERT OR REPLACE INTO entries (key, value, stored_at) VALUES (?, ?, ?)", (key, value, now))
                self._bytes += len(value) - (old[0] if old else 0)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        if self._bytes > self._bounds.max_bytes or now - self._pruned_at > PRUNE_EVERY_SECONDS:
            self._prune()

    def _prune(self) -> None:
        """Forgets what is too old, then the oldest until the size bound holds again."""
        db = self._db()
        self._pruned_at = time.time()
        db.execute("DELETE FROM entries WHERE stored_at < ?", (self._pruned_at - self._bounds.max_age_seconds,))
        # Another process may share the file: the size is counted again rather than trusted.
        self._bytes = db.execute("SELECT coalesce(sum(length(value)), 0) FROM entries").fetchone()[0]
        if self._bytes <= self._bounds.max_bytes:
            return
        target = self._bounds.max_bytes * EVICT_TO
        while self._bytes > target:
            oldest = db.execute("SELECT key, length(value) FROM entries ORDER BY stored_at LIMIT 200").fetchall()
            if not oldest:
                break
            for key, size in oldest:
                db.execute("DELETE FROM entries WHERE key = ?", (key,))
                self._bytes -= size
                if self._bytes <= target:
                    break
