"""The token vault TOOLBRIDGE_STATE_URL's kind calls for, with its key, opened for the app's life.

- SQLite: a file beside memory's (vault_sqlite.py); the key is TOOLBRIDGE_TOKEN_KEY or a file beside the vault
  (state.db -> state.tokens.key), generated at the first start: it lives as long as the tokens it opens (a
  container's volume), and an operator who wants the two apart sets the setting.
- Redis: replicas share the tokens, so they must share the key: TOOLBRIDGE_TOKEN_KEY is required, since a key
  generated on one machine would be another replica's garbage.
- memory:// and none: process memory; without the setting the key is made for this process alone, as the
  tokens themselves are (sign in again after a restart).
"""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from cryptography.fernet import Fernet

from app.state.store import parse_state_url
from app.state.token_key import SETTING, TokenKeyError, key_from_file, key_from_setting
from app.state.vault import MemoryVaultBackend, Vault, VaultBackend
from app.state.vault_sqlite import SqliteVaultBackend, vault_path


def key_path(state_path: Path) -> Path:
    return state_path.with_name(f"{state_path.stem}.tokens.key")


@asynccontextmanager
async def open_vault(state_url: str, token_key: str | None = None) -> AsyncIterator[Vault]:
    """The vault, closed at the end.

    Raises:
        TokenKeyError: at start, a key that cannot be had (the message names the setting or file and the fix).
        StateStoreError: the SQLite file cannot be opened.
    """
    kind, path = parse_state_url(state_url)
    key = _key(kind, path, token_key)
    backend: VaultBackend
    if kind == "sqlite":
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


def _key(kind: str, path: Path | None, token_key: str | None) -> bytes:
    if token_key and token_key.strip():
        return key_from_setting(token_key)
    if kind == "redis":
        raise TokenKeyError(f"{SETTING} must be set when TOOLBRIDGE_STATE_URL is redis://: replicas share the "
                            "sign-in tokens kept there, so they must share the key that encrypts them")
    if kind == "sqlite":
        assert path is not None
        return key_from_file(key_path(path))
    return Fernet.generate_key()
