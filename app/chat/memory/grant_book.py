"""Where grants are kept (issue 48): one vault record per API key (app/state/vault.py: encrypted, replaced and
deleted, never evicted; SQLite beside memory's file, Redis for replicas, this process's memory otherwise), under a
name keyed with the vault's key. A change is made while the record is held (`Vault.holding`), so two replicas
granting at once both keep theirs.

What a key may hold is bounded (MAX_GRANTS): expired grants go at each change, then the oldest. A record the vault
cannot open (another key, damaged) reads as no grants: the person is asked again, nothing runs unasked.
"""

import time
from collections.abc import Callable, Sequence

import structlog

from app.chat.asking import Grant, grant_from_json
from app.state import StateStoreError, Vault

log = structlog.get_logger("toolbridge.grants")

MAX_GRANTS = 200  # per API key: the oldest go past it
HOLD_SECONDS = 5.0


class GrantBook:
    """Each key's grants, read before a call that asks first and changed by the person's answers and the status
    page."""

    def __init__(self, vault: Vault, clock: Callable[[], float] = time.time) -> None:
        self._vault = vault
        self.clock = clock

    @classmethod
    def in_memory(cls, clock: Callable[[], float] = time.time) -> "GrantBook":
        """A book in this process's memory (tests; a gateway whose vault cannot be opened)."""
        from cryptography.fernet import Fernet

        from app.state import MemoryVaultBackend

        return cls(Vault(MemoryVaultBackend(), Fernet.generate_key()), clock)

    async def of(self, owner: str) -> list[Grant]:
        """The owner's grants still in force, oldest first.

        Raises:
            StateStoreError: the vault cannot be read (the caller asks the person rather than run unasked).
        """
        now = self.clock()
        return [grant for grant in await self._read(self._name(owner)) if grant.alive(now)]

    async def add(self, owner: str, grants: Sequence[Grant]) -> None:
        if not grants:
            return
        name = self._name(owner)
        async with self._vault.holding(name, HOLD_SECONDS):
            now = self.clock()
            kept = [grant for grant in await self._read(name) if grant.alive(now)]
            await self._write(name, [*kept, *grants][-MAX_GRANTS:])
        log.info("grants_added", grants=[grant.described() for grant in grants])

    async def revoke(self, owner: str, grant_id: str) -> Grant | None:
        """Takes the grant out; the grant, or None when the owner has none by that id."""
        name = self._name(owner)
        async with self._vault.holding(name, HOLD_SECONDS):
            grants = await self._read(name)
            gone = next((grant for grant in grants if grant.id == grant_id), None)
            if gone is not None:
                await self._write(name, [grant for grant in grants if grant.id != grant_id])
        if gone is not None:
            log.info("grant_revoked", grant=gone.described())
        return gone

    def _name(self, owner: str) -> str:
        return "grants/" + self._vault.private_name(owner)

    async def _read(self, name: str) -> list[Grant]:
        record = await self._vault.get(name)
        listed = record.get("grants") if record is not None else None
        if not isinstance(listed, list):
            return []
        return [grant for value in listed if (grant := grant_from_json(value)) is not None]

    async def _write(self, name: str, grants: Sequence[Grant]) -> None:
        if grants:
            await self._vault.put(name, {"grants": [grant.as_json() for grant in grants]})
        else:
            await self._vault.delete(name)


__all__ = ["MAX_GRANTS", "GrantBook", "StateStoreError"]
