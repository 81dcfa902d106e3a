"""The default store: one SQLite file (stdlib sqlite3) in WAL mode, so memory survives a restart.

The file and its WAL companions are readable by their owner only: they hold tool results. Calls run in a
worker thread, one at a time, so a slow disk never stalls the event loop.

A failure is hard to see from outside (requests are still answered, without memory), so `problem` says
what went wrong for /health: the last failed write or read until one succeeds, and a database file that
was deleted or replaced under the open connection (what is written then is lost at restart).
"""

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Self, TypeVar

import anyio.to_thread

from app.state.store import ANONYMOUS, CLAIMED, Bounds, StateStoreError

SCHEMA_VERSION = 3  # 2: the owner and size of each entry; 3: names keyed, values sealed (seal.py). Older: never read
PRUNE_EVERY_SECONDS = 60.0
EVICT_TO = 0.9  # past the size bound, forget down to this share of it, not one entry per write
_MAX_KEYS_PER_QUERY = 500
T = TypeVar("T")


def owner_only_connection(path: Path) -> sqlite3.Connection:
    """A connection in WAL mode to a file only its owner may read, in a directory only its owner may list."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # Created owner-only before SQLite opens it; its -wal and -shm files take the same mode.
    os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
    os.chmod(path, 0o600)
    connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=5.0)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
    except BaseException:
        connection.close()
        raise
    return connection


class SqliteStore:
    kind = "sqlite"

    def __init__(self, path: Path, bounds: Bounds) -> None:
        self.path = path
        self._bounds = bounds
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._bytes = 0
        self._pruned_at = 0.0
        self._identity: tuple[int, int] | None = None  # the file's (device, inode) when it was opened
        self._failed: dict[str, str] = {}  # "write" | "read": why the last one failed, until one succeeds

    async def __aenter__(self) -> Self:
        await self._run(self._open)
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def get_many(self, keys: Sequence[str], max_bytes: int | None = None) -> dict[str, bytes]:
        return await self._run(lambda: self._get_many(keys, max_bytes), "read")

    async def put_many(self, items: Mapping[str, bytes], owner: str = ANONYMOUS) -> None:
        await self._run(lambda: self._put_many(items, owner), "write")

    async def claim(self, key: str, owner: str = ANONYMOUS, mark: bytes = CLAIMED) -> bool:
        # One transaction (BEGIN IMMEDIATE): of two processes sharing the file, one inserts, the other finds it.
        return await self._run(lambda: self._put_many({key: mark}, owner), "write") == 1

    async def problem(self) -> str | None:
        """Why memory does not work, in SQLite's words and without the file's path (/health shows it)."""
        if self._identity is not None:
            try:
                now = os.stat(self.path)
            except FileNotFoundError:
                return "the database file was deleted: what is stored now is lost at restart"
            except OSError as exc:
                return f"the database file cannot be read: {exc.strerror or exc}"
            if (now.st_dev, now.st_ino) != self._identity:
                return "the database file was replaced: what is stored now is lost at restart"
        for operation in ("write", "read"):
            if operation in self._failed:
                return f"the last {operation} failed: {self._failed[operation]}"
        return None

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self._close)

    async def _run(self, work: Callable[[], T], operation: str = "open") -> T:
        try:
            result = await anyio.to_thread.run_sync(self._locked, work)
        except sqlite3.Error as exc:
            self._failed[operation] = str(exc)
            raise StateStoreError(f"{self.path}: {exc}") from exc
        except OSError as exc:
            self._failed[operation] = str(exc.strerror or exc)
            raise StateStoreError(f"{self.path}: {exc.strerror or exc}") from exc
        self._failed.pop(operation, None)
        return result

    def _locked(self, work: Callable[[], T]) -> T:
        with self._lock:
            return work()

    def _open(self) -> None:
        connection = owner_only_connection(self.path)
        try:
            connection.execute("PRAGMA synchronous=NORMAL")  # WAL keeps the file sound; a crash may lose the last turn
            if connection.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
                # Older entries could never be found again (keys scoped to an owner since 2, keyed and sealed since 3).
                connection.execute("DROP TABLE IF EXISTS entries")
            connection.execute("CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value BLOB NOT NULL, "
                               "stored_at REAL NOT NULL, owner TEXT NOT NULL, size INTEGER NOT NULL)")
            connection.execute("CREATE INDEX IF NOT EXISTS entries_by_age ON entries (stored_at)")
            connection.execute("CREATE INDEX IF NOT EXISTS entries_by_owner ON entries (owner, stored_at, size)")
            connection.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            opened = os.stat(self.path)
        except BaseException:
            connection.close()
            raise
        self._connection = connection
        self._identity = (opened.st_dev, opened.st_ino)
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

    def _get_many(self, keys: Sequence[str], max_bytes: int | None) -> dict[str, bytes]:
        unique = list(dict.fromkeys(keys))
        found: dict[str, bytes] = {}
        if max_bytes is not None:
            unique, no_room = self._within(unique, max_bytes)
            found.update(dict.fromkeys(no_room, b""))
        cutoff = time.time() - self._bounds.max_age_seconds
        for start in range(0, len(unique), _MAX_KEYS_PER_QUERY):
            batch = unique[start:start + _MAX_KEYS_PER_QUERY]
            marks = ",".join("?" * len(batch))
            rows = self._db().execute(
                f"SELECT key, value FROM entries WHERE stored_at >= ? AND key IN ({marks})", (cutoff, *batch)
            )
            found.update((key, bytes(value)) for key, value in rows)
        return found

    def _within(self, keys: list[str], max_bytes: int) -> tuple[list[str], list[str]]:
        """The keys whose values, taken in this order, fit in `max_bytes`, and those there that do not: sizes
        are read, not values."""
        sizes: dict[str, int] = {}
        for start in range(0, len(keys), _MAX_KEYS_PER_QUERY):
            batch = keys[start:start + _MAX_KEYS_PER_QUERY]
            marks = ",".join("?" * len(batch))
            sizes.update(self._db().execute(f"SELECT key, size FROM entries WHERE key IN ({marks})", batch))
        chosen, no_room = [], []
        for key in keys:
            size = sizes.get(key)
            if size is None:
                continue
            if size <= max_bytes:
                chosen.append(key)
                max_bytes -= size
            else:
                no_room.append(key)
        return chosen, no_room

    def _put_many(self, items: Mapping[str, bytes], owner: str) -> int:
        """Stores what is not there yet; how many keys were new."""
        db = self._db()
        now = time.time()
        written = 0
        db.execute("BEGIN IMMEDIATE")
        try:
            for key, value in items.items():
                # Never over another request's entry: the first writer of a key keeps it.
                added = db.execute("INSERT OR IGNORE INTO entries (key, value, stored_at, owner, size) "
                                   "VALUES (?, ?, ?, ?, ?)", (key, value, now, owner, len(value))).rowcount
                self._bytes += len(value) if added else 0
                written += added
            self._keep_share(owner)
            db.execute("COMMIT")
        except BaseException:
            # A failed statement may have ended the transaction already (a full disk does): ROLLBACK would
            # then fail with "no transaction is active" and hide the real error, which is what is raised.
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        if self._bytes > self._bounds.max_bytes or now - self._pruned_at > PRUNE_EVERY_SECONDS:
            self._prune()
        return written

    def _keep_share(self, owner: str) -> None:
        """An owner past its share forgets its own oldest entries, so one API key cannot evict the others'."""
        share = self._bounds.owner_bytes(owner)
        if share is None:
            return
        db = self._db()
        held = db.execute("SELECT coalesce(sum(size), 0) FROM entries WHERE owner = ?", (owner,)).fetchone()[0]
        if held <= share:
            return
        target = share * EVICT_TO
        for key, size in db.execute("SELECT key, size FROM entries WHERE owner = ? ORDER BY stored_at",
                                    (owner,)).fetchall():
            db.execute("DELETE FROM entries WHERE key = ?", (key,))
            held -= size
            self._bytes -= size
            if held <= target:
                break

    def _prune(self) -> None:
        """Forgets what is too old, then the oldest until the size bound holds again."""
        db = self._db()
        self._pruned_at = time.time()
        db.execute("DELETE FROM entries WHERE stored_at < ?", (self._pruned_at - self._bounds.max_age_seconds,))
        # Another process may share the file: the size is counted again rather than trusted.
        self._bytes = db.execute("SELECT coalesce(sum(size), 0) FROM entries").fetchone()[0]
        if self._bytes <= self._bounds.max_bytes:
            return
        target = self._bounds.max_bytes * EVICT_TO
        while self._bytes > target:
            oldest = db.execute("SELECT key, size FROM entries ORDER BY stored_at LIMIT 200").fetchall()
            if not oldest:
                break
            for key, size in oldest:
                db.execute("DELETE FROM entries WHERE key = ?", (key,))
                self._bytes -= size
                if self._bytes <= target:
                    break
