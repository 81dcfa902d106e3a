"""The store TOOLBRIDGE_STATE_URL names, sealed with the gateway's secret (seal.py), opened for the app's life and
closed at its end."""

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import structlog

from app.state.seal import SealedStore
from app.state.store import Bounds, MemoryStore, StateStore, StateStoreError, parse_state_url
from app.state.token_key import TokenKeyError, gateway_key, secret_bytes

log = structlog.get_logger("toolbridge.state")


@asynccontextmanager
async def open_state_store(
    url: str, bounds: Bounds, failed: Callable[[str], None] = lambda _: None, token_key: str | None = None,
) -> AsyncIterator[StateStore | None]:
    """The store, or None for `none`. A SQLite file, or its key file, that cannot be used is logged, told to
    `failed` (for /health: why, without the file's path) and memory is off: the gateway still serves.

    Raises:
        TokenKeyError: Redis without TOOLBRIDGE_TOKEN_KEY (replicas must share it): the gateway does not start.
    """
    kind, path = parse_state_url(url)
    if kind == "none":
        yield None
        return
    try:
        secret = secret_bytes(gateway_key(url, token_key))
    except TokenKeyError as exc:
        if kind == "redis":
            raise
        _unavailable(exc, failed, "the key file that seals it cannot be used (the log says why)")
        yield None
        return
    async with _opened(url, kind, path, bounds, failed) as store:
        yield None if store is None else SealedStore(store, secret)


@asynccontextmanager
async def _opened(url: str, kind: str, path: Path | None, bounds: Bounds,
                  failed: Callable[[str], None]) -> AsyncIterator[StateStore | None]:
    if kind in ("memory", "redis"):
        # Redis is not asked at start: one that is down now serves later, and /health says so meanwhile.
        store = MemoryStore(bounds) if kind == "memory" else _redis_store(url.strip(), bounds)
        try:
            yield store
        finally:
            await store.aclose()
        return
    assert path is not None  # parse_state_url gives a SQLite URL its path
    # Imported here, as Redis's store is: sqlite3 is 0.8 MB of memory that a gateway on memory:// or Redis never uses.
    from app.state.sqlite import SqliteStore

    sqlite = SqliteStore(path, bounds)
    try:
        await sqlite.__aenter__()
    except StateStoreError as exc:
        cause = exc.__cause__
        reason = (cause.strerror if isinstance(cause, OSError) and cause.strerror else str(cause or exc))
        _unavailable(exc, failed, f"the database could not be opened ({reason})")
        yield None
        return
    try:
        yield sqlite
    finally:
        await sqlite.aclose()


def _unavailable(exc: Exception, failed: Callable[[str], None], why: str) -> None:
    log.error("state_store_unavailable", store="sqlite", error=str(exc),
              consequence="conversation memory is off until the gateway restarts")
    failed(f"{why}: memory is off until the gateway restarts")


def _redis_store(url: str, bounds: Bounds) -> StateStore:
    # Imported here, not at the top: redis-py costs 8 MB of memory that a gateway without Redis never uses.
    from app.state.redis import RedisStore

    return RedisStore(url, bounds)
