"""Conversation memory's store: in memory, SQLite or Redis, named by TOOLBRIDGE_STATE_URL. Start-up opens
it with `open_state_store`, sealed with the gateway's secret (seal.py); the chat request's memory reads and
writes through `StateStore`. Beside it, the
token vault (`open_vault`, `Vault`): encrypted secrets that must outlive memory, replaced and deleted, never
evicted.

`RedisStore` and `RedisVaultBackend` are not among these names: redis-py is imported only when a Redis
URL is opened (open.py, vault_open.py); nor the SQLite store and vault: sqlite3, only when a SQLite file is.
"""

from app.state.open import open_state_store
from app.state.seal import SealedStore
from app.state.store import ANONYMOUS, Bounds, MemoryStore, StateStore, StateStoreError, parse_state_url
from app.state.token_key import TokenKeyError, require_key
from app.state.vault import MemoryVaultBackend, Vault, VaultBackend
from app.state.vault_open import open_vault

__all__ = [
    "ANONYMOUS",
    "Bounds",
    "MemoryStore",
    "MemoryVaultBackend",
    "SealedStore",
    "StateStore",
    "StateStoreError",
    "TokenKeyError",
    "Vault",
    "VaultBackend",
    "open_state_store",
    "open_vault",
    "parse_state_url",
    "require_key",
]
