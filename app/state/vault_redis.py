"""The token vault in Redis, shared by replicas: one key per name under `toolbridge:vault:v1:`, plain SET, GET
and DEL, no TTL (a token is kept until it is refreshed or its owner signs out) and none of memory's eviction.
Values are ciphertext; every replica must have the same TOOLBRIDGE_TOKEN_KEY to read them.

A name is held across replicas by a key under `toolbridge:hold:v1:` (`SET NX PX`, its value a token of the
holder's, deleted only by that holder), which expires by itself if the holder dies."""

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import TypeVar, cast

import anyio
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from app.state.store import StateStoreError

PREFIX = "toolbridge:vault:v1:"
HOLDS = "toolbridge:hold:v1:"  # apart from the vault's names, which are listed by prefix
SOCKET_TIMEOUT = 2.0
HOLD_LOOK = 0.05  # how often a replica waiting for a held name asks again: Redis has no wait for a key's end
# The holder's own hold only: another's, taken after this one expired, is left alone.
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
T = TypeVar("T")


class RedisVaultBackend:
    kind = "redis"

    def __init__(self, url: str) -> None:
        self._client = aioredis.Redis.from_url(url, socket_timeout=SOCKET_TIMEOUT,
                                               socket_connect_timeout=SOCKET_TIMEOUT, retry_on_timeout=False)
        scheme, _, rest = url.partition("://")
        self._where = f"{scheme}://{rest.rsplit('@', 1)[-1]}"  # never the password

    async def read(self, name: str) -> bytes | None:
        value = await self._call(lambda: self._client.get(PREFIX + name))
        # redis-py types values as bytes | str; this client does not decode responses, so they are bytes
        return cast(bytes | None, value)

    async def write(self, name: str, value: bytes) -> None:
        await self._call(lambda: self._client.set(PREFIX + name, value))

    async def remove(self, name: str) -> None:
        await self._call(lambda: self._client.delete(PREFIX + name))

    async def names(self, prefix: str) -> list[str]:
        pattern = PREFIX + "".join(f"\\{char}" if char in "*?[]\\" else char for char in prefix) + "*"

        async def scan() -> list[str]:
            return [key.decode()[len(PREFIX):] async for key in self._client.scan_iter(match=pattern, count=500)]

        return sorted(await self._call(scan))

    @asynccontextmanager
    async def holding(self, name: str, seconds: float) -> AsyncIterator[None]:
        key, mine = HOLDS + name, secrets.token_hex(16)
        # Waits a little longer than a hold lasts: a holder that died has let go by then.
        deadline = anyio.current_time() + seconds + 1.0
        while True:
            # Shielded: cancelled between Redis setting the key and its answer, the hold would be kept, unknown,
            # until it expired, and every replica would wait for it.
            with anyio.CancelScope(shield=True):
                if await self._call(lambda: self._client.set(key, mine, nx=True, px=int(seconds * 1000))):
                    break
            if anyio.current_time() > deadline:
                raise StateStoreError(f"{self._where}: '{name}' stayed held for {seconds:g} s")
            await anyio.sleep(HOLD_LOOK)
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True), suppress(StateStoreError):  # unanswered: it expires by itself
                await self._call(lambda: self._client.eval(_RELEASE, 1, key, mine))

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _call(self, work: Callable[[], Awaitable[T]]) -> T:
        try:
            return await work()
        except RedisError as exc:
            raise StateStoreError(f"{self._where}: {exc}") from exc
