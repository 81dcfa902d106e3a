"""The store TOOLBRIDGE_STATE_URL names, opened for the app's life and closed at its end."""

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import structlog

from app.state.sqlite import SqliteStore
from app.state.store import Bounds, MemoryStore, StateStore, StateStoreError, parse_state_url

log = structlog.get_logger("toolbridge.state")


@asynccontextmanager
async def open_state_store(
    url: str, bounds: Bounds, failed: Callable[[str], None] = lambda _: None
) -> AsyncIterator[StateStore | None]:
    """The store, or None for `none`. A SQLite file that cannot be opened is logged, told to `failed` (for
    /health: why, without the file's path) and memory is off: the gateway still serves."""
    kind, path = parse_state_url(url)
    if kind == "none":
        yield None
        return
    if kind in ("memory", "redis"):
        # Redis is not asked at start: one that is down now serves later, and /health says so meanwhile.
        store = MemoryStore(bounds) if kind == "memory" else _redis_store(url.strip(), bounds)
        try:
            yield store
        finally:
            await store.aclose()
        return
    assert path is not None
    sqlite = SqliteStore(path, bounds)
    try:
        await sqlite.__aenter__()
    except StateStoreError as exc:
        log.error("state_store_unavailable", store="sqlite", error=str(exc),
                  consequence="conversation memory is off until the gateway restarts")
        cause = exc.__cause__
        reason = (cause.strerror if isinstance(cause, OSError) and cause.strerror else str(cause or exc))
        failed(f"the database could not be opened ({reason}): memory is off until the gateway restarts")
        yield None
        return
    try:
        yield sqlite
    finally:
        await sqlite.aclose()


def _redis_store(url: str, bounds: Bounds) -> StateStore:
    # Imported here, not at the top: redis-py costs 8 MB of memory that a gateway without Redis never uses.
    from app.state.redis import RedisStore

    return RedisStore(url, bounds)
