"""A person's sign-in's pending records (`app/mcp/sign_in.py`): bounded per key, the oldest of that key's dropped
first, another key's never, expired ones gone. (The whole sign-in runs over real HTTP in tests/test_sign_in.py, and
the flood in tests/security/test_pending_sign_ins.py.)"""

import time

import pytest
from cryptography.fernet import Fernet

from app.mcp.sign_in import MOST_PENDING, PENDING, _prune
from app.state import MemoryVaultBackend, Vault

pytestmark = pytest.mark.anyio


async def pending(vault: Vault) -> dict[str, list[float]]:
    """Each owner's pending sign-ins' expiry times, oldest first."""
    found: dict[str, list[float]] = {}
    for name in await vault.names(PENDING):
        record = await vault.get(name)
        assert record is not None
        found.setdefault(record["owner"], []).append(record["expires_at"])
    return {owner: sorted(times) for owner, times in found.items()}


async def test_a_keys_own_oldest_pending_sign_ins_make_room_and_no_other_keys_do() -> None:
    vault = Vault(MemoryVaultBackend(), Fernet.generate_key())
    now = time.time()
    for number in range(MOST_PENDING):
        await vault.put(f"{PENDING}flood-{number}", {"owner": "carol", "expires_at": now + 100 + number})
    await vault.put(f"{PENDING}alice", {"owner": "alice", "expires_at": now + 50})  # older than all of carol's
    await vault.put(f"{PENDING}gone", {"owner": "bob", "expires_at": now - 1})
    await _prune(vault, "carol")
    left = await pending(vault)
    assert left["alice"] == [now + 50] and "bob" not in left
    assert left["carol"] == [now + 100 + number for number in range(1, MOST_PENDING)]  # room for the one she starts
    await _prune(vault, "alice")
    assert await pending(vault) == left
