"""The token vault TOOLBRIDGE_STATE_URL's kind calls for, with its key (token_key.py), opened for the app's life.

- SQLite: a file beside memory's (vault_sqlite.py).
- Redis: shared by the replicas, as TOOLBRIDGE_TOKEN_KEY is.
- memory:// and none: process memory (sign in again after a restart).
"""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from app.state.store import parse_state_url
from app.state.token_key import gateway_key
from app.state.vault import MemoryVaultBackend, Vault, VaultBackend


@asynccontextmanager
async def open_vault(state_url: str, token_key: str | None = None) -> AsyncIterator[Vault]:
    """The vault, closed at the end.

    Raises:
        TokenKeyError: at start, a key that cannot be had (the message names the setting or file and the fix).
        StateStoreError: the SQLite file cannot be opened.
    """
    kind, path = parse_state_url(state_url)
    key = gateway_key(state_url, token_key)
    backend: VaultBackend
    if kind == "sqlite":
        # Imported here, as memory's SQLite store is (open.py).
        from app.state.vault_sqlite import SqliteVaultBackend, vault_path

        assert path is not None
        sqlite = SqliteVaultBackend(vault_path(path))
        await sqlite.open()
        backend = sqlite
    elif kind == "redis":
        # Imported here, as memory's Redis store is: redis-py costs 8 MB a gateway without Redis never uses.
        from app.state.vault_redis import RedisVaultBackend

        backend = RedisVaultBackend(state_url.strip())
    else:
        backend = MemoryVaultBackend()
    vault = Vault(backend, key)
    try:
        yield vault
    finally:
        await vault.aclose()

