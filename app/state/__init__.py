"""Conversation memory's store: in memory, SQLite or Redis, named by TOOLBRIDGE_STATE_URL. Start-up opens
it with `open_state_store`; the chat request's memory reads and writes through `StateStore`.

`RedisStore` is not among these names: redis-py is imported only when a Redis URL is opened (open.py).
"""

from app.state.open import open_state_store
from app.state.sqlite import SqliteStore
from app.state.store import ANONYMOUS, Bounds, MemoryStore, StateStore, StateStoreError, parse_state_url

__all__ = [
    "ANONYMOUS",
    "Bounds",
    "MemoryStore",
    "SqliteStore",
    "StateStore",
    "StateStoreError",
    "open_state_store",
    "parse_state_url",
]
