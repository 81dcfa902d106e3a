"""The token vault's SQLite file: a file of its own beside conversation memory's (state.db ->
state.tokens.db), owner-only, in WAL mode.

A file of its own rather than a table in state.db: memory's file is dropped and rebuilt when its schema
changes and may be deleted to forget conversations, neither of which may sign anyone out; and a large memory
write holding SQLite's one write lock never delays a token refresh. Calls run in a worker thread, one at a
time, so a slow disk never stalls the event loop. A name is held in this process (`LocalHolds`): the file is
one gateway's.
"""

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import anyio.to_thread

from app.state.sqlite import owner_only_connection
from app.state.store import StateStoreError
from app.state.vault import LocalHolds

T = TypeVar("T")


def vault_path(state_path: Path) -> Path:
    """The vault's file for memory's `state_path`: the same directory and stem."""
    return state_path.with_name(f"{state_path.stem}.tokens.db")


class SqliteVaultBackend(LocalHolds):
    kind = "sqlite"

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None

    async def open(self) -> None:
        await self._run(self._open)

    async def read(self, name: str) -> bytes | None:
        row = await self._run(lambda: self._db().execute("SELECT value FROM secrets WHERE name = ?",
                                                         (name,)).fetchone())
        return bytes(row[0]) if row else None

    async def write(self, name: str, value: bytes) -> None:
        await self._run(lambda: self._db().execute(
            "INSERT INTO secrets (name, value, updated_at) VALUES (?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
            "value = excluded.value, updated_at = excluded.updated_at", (name, value, time.time())))

    async def remove(self, name: str) -> None:
        await self._run(lambda: self._db().execute("DELETE FROM secrets WHERE name = ?", (name,)))

    async def names(self, prefix: str) -> list[str]:
        # substr, not LIKE: a prefix's own % and _ are plain characters.
        rows = await self._run(lambda: self._db().execute(
            "SELECT name FROM secrets WHERE substr(name, 1, ?) = ? ORDER BY name", (len(prefix), prefix)).fetchall())
        return [row[0] for row in rows]

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
        connection = owner_only_connection(self.path)
        try:
            connection.execute("PRAGMA secure_delete=ON")  # a deleted token's ciphertext is overwritten, not left
            connection.execute("CREATE TABLE IF NOT EXISTS secrets (name TEXT PRIMARY KEY, value BLOB NOT NULL, "
                               "updated_at REAL NOT NULL)")
        except BaseException:
            connection.close()
            raise
        self._connection = connection

    def _close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def _db(self) -> sqlite3.Connection:
        if self._connection is None:
            raise sqlite3.ProgrammingError("the vault is closed")
        return self._connection
