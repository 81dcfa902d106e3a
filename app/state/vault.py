"""The token vault: secrets that must outlive conversation memory (OAuth tokens, client registrations, an
authorization server's metadata, a token's absolute expiry), each a small JSON object under a name.

Unlike the conversation store (store.py) a value is replaced by a later `put`, gone after `delete`, and never
evicted by size or age: a token is kept until it is refreshed or its owner signs out. Every value is encrypted
with Fernet (AES-128-CBC with HMAC-SHA256, from the `cryptography` library) before a backend sees it, so the
SQLite file and Redis hold only ciphertext, and the name is sealed in with the value: a value that does not
decrypt (the key changed), or was sealed for another name (copied there by whoever can write to the store), is
treated as absent and logged once, without the value: the person signs in again; nothing crashes.

A name can also be held (`holding`): one holder at a time among everything that shares the backend (every
replica on one Redis; this process for a SQLite file or memory), so that work which must not run twice at once,
a sign-in's refresh, runs once.
"""

import hashlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol

import anyio
import orjson
import structlog
from cryptography.fernet import Fernet, InvalidToken

from app.openai.wire import JSONObject, JSONValue
from app.state.store import StateStoreError

log = structlog.get_logger("toolbridge.vault")


class VaultBackend(Protocol):
    """Where the ciphertext lives (MemoryVaultBackend, vault_sqlite.py, vault_redis.py); a failure is a
    `StateStoreError`."""

    kind: str

    async def read(self, name: str) -> bytes | None: ...

    async def write(self, name: str, value: bytes) -> None:
        """Stores `value` under `name`, replacing what was there."""
        ...

    async def remove(self, name: str) -> None: ...

    async def names(self, prefix: str) -> list[str]: ...

    def holding(self, name: str, seconds: float) -> AbstractAsyncContextManager[None]:
        """`name` held while the block runs, by one holder at a time among all that share the backend; waits
        for it at most about `seconds`, and a holder that dies keeps it at most `seconds`.

        Raises:
            StateStoreError: held elsewhere all that time, or the backend did not answer.
        """
        ...

    async def aclose(self) -> None: ...


class LocalHolds:
    """`holding` for a backend one process owns (memory, its SQLite file): a semaphore per name, in this process
    (not a lock: a lock refuses the task that holds it, where Redis would make it wait like anyone)."""

    def __init__(self) -> None:
        self._holds: dict[str, anyio.Semaphore] = {}

    @asynccontextmanager
    async def holding(self, name: str, seconds: float) -> AsyncIterator[None]:
        hold = self._holds.setdefault(name, anyio.Semaphore(1))
        acquired = False
        with anyio.move_on_after(seconds):
            await hold.acquire()
            acquired = True
        if not acquired:
            raise StateStoreError(f"'{name}' stayed held for {seconds:g} s")
        try:
            yield
        finally:
            hold.release()


class MemoryVaultBackend(LocalHolds):
    """This process's memory: gone at restart (TOOLBRIDGE_STATE_URL=memory:// or none)."""

    kind = "memory"

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, bytes] = {}

    async def read(self, name: str) -> bytes | None:
        return self.values.get(name)

    async def write(self, name: str, value: bytes) -> None:
        self.values[name] = value

    async def remove(self, name: str) -> None:
        self.values.pop(name, None)

    async def names(self, prefix: str) -> list[str]:
        return sorted(name for name in self.values if name.startswith(prefix))

    async def aclose(self) -> None:
        self.values.clear()


class Vault:
    """Named JSON objects, encrypted under one Fernet key. Names are not secret (they appear in logs)."""

    def __init__(self, backend: VaultBackend, key: bytes) -> None:
        self.backend = backend
        self.kind = backend.kind
        self._fernet = Fernet(key)
        # Names that must not tell whose they are (an owner's digest, which a weak API key would give away offline).
        self._names = hashlib.blake2b(key, digest_size=32, person=b"vault names").digest()
        self._unreadable: set[str] = set()  # names already logged as not decrypting

    def private_name(self, text: str) -> str:
        """`text` keyed with the vault's key: a name that says whose it is only to this gateway."""
        return hashlib.blake2b(_bytes(text), key=self._names, digest_size=16, person=b"private name").hexdigest()

    async def get(self, name: str) -> JSONObject | None:
        sealed = await self.backend.read(name)
        if sealed is None:
            return None
        try:
            plain = self._fernet.decrypt(sealed)
        except InvalidToken:
            self._refused(name, "encrypted under another key (TOOLBRIDGE_TOKEN_KEY or the key file changed)")
            return None
        bound, _, text = plain.partition(b"\0")
        if bound != _bytes(name):  # another name's value copied here, or one written before names were bound
            self._refused(name, "sealed for another name, or before names were sealed in (28 November 2026)")
            return None
        value: JSONValue = orjson.loads(text)
        return value if isinstance(value, dict) else None

    async def put(self, name: str, value: JSONObject) -> None:
        # The name inside the ciphertext: whoever can write to the store cannot move one identity's tokens (an
        # operator's) under another's name (a limited key's); Fernet authenticates the whole of it.
        await self.backend.write(name, self._fernet.encrypt(_bytes(name) + b"\0" + orjson.dumps(value)))
        self._unreadable.discard(name)

    def _refused(self, name: str, reason: str) -> None:
        if name not in self._unreadable:
            self._unreadable.add(name)
            log.warning("vault_value_unreadable", name=name, consequence="treated as absent: sign in again",
                        reason=reason)

    async def delete(self, name: str) -> None:
        await self.backend.remove(name)

    async def names(self, prefix: str = "") -> list[str]:
        return await self.backend.names(prefix)

    def holding(self, name: str, seconds: float) -> AbstractAsyncContextManager[None]:
        """See `VaultBackend.holding`."""
        return self.backend.holding(name, seconds)

    async def aclose(self) -> None:
        await self.backend.aclose()


def _bytes(name: str) -> bytes:
    return name.encode("utf-8", "surrogatepass")
