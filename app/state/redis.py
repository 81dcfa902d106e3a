"""The store for replicas: Redis, shared by every gateway behind a load balancer (TOOLBRIDGE_STATE_URL=redis://).

Entries live under `toolbridge:v1:` with a TTL of the age bound; the size bound is kept the way the SQLite
store keeps it, oldest first, by one Lua script per write (an index of keys by time, their sizes, a byte
count), so replicas writing at once stay within it. A single Redis (or one behind Sentinel): the script
touches keys it does not declare, which Redis Cluster refuses.

Every call is bounded by SOCKET_TIMEOUT: a Redis that is down or unreachable costs a request that long
once, and it goes on without memory (`StateStoreError`). The client reconnects by itself when Redis is
back; `/health` pings it and says `degraded` meanwhile.
"""

import time
from collections.abc import Mapping, Sequence

import anyio
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from app.state.store import Bounds, StateStoreError

PREFIX = "toolbridge:v1:"
SOCKET_TIMEOUT = 2.0
HEALTH_PING_TIMEOUT = 0.5
_INDEX, _SIZES, _BYTES = PREFIX + "index", PREFIX + "sizes", PREFIX + "bytes"

# KEYS: the index (key -> time written), the sizes (key -> bytes), the byte count.
# ARGV: now, the age bound (s), the size bound (bytes), the prefix, then key, value, key, value...
_PUT = """
local now, age, cap, prefix = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local function forget(key)
  local size = tonumber(redis.call('HGET', KEYS[2], key) or '0')
  redis.call('HDEL', KEYS[2], key)
  redis.call('ZREM', KEYS[1], key)
  redis.call('DEL', prefix .. key)
  redis.call('DECRBY', KEYS[3], size)
end
for _, key in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - age)) do forget(key) end
for i = 5, #ARGV, 2 do
  local key, value = ARGV[i], ARGV[i + 1]
  local old = tonumber(redis.call('HGET', KEYS[2], key) or '0')
  redis.call('SET', prefix .. key, value, 'PX', math.max(1, math.floor(age * 1000)))
  redis.call('HSET', KEYS[2], key, #value)
  redis.call('ZADD', KEYS[1], now, key)
  redis.call('INCRBY', KEYS[3], #value - old)
end
local total = tonumber(redis.call('GET', KEYS[3]) or '0')
while total > cap do
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0)
  if #oldest == 0 then break end
  forget(oldest[1])
  total = tonumber(redis.call('GET', KEYS[3]) or '0')
end
return total
"""


class RedisStore:
    kind = "redis"

    def __init__(self, url: str, bounds: Bounds) -> None:
        self._bounds = bounds
        self._client = aioredis.Redis.from_url(url, socket_timeout=SOCKET_TIMEOUT,
                                               socket_connect_timeout=SOCKET_TIMEOUT, retry_on_timeout=False)
        self._put = self._client.register_script(_PUT)
        self._where = _without_password(url)

    async def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        if not keys:
            return {}
        try:
            values = await self._client.mget([PREFIX + key for key in keys])
        except RedisError as exc:
            raise StateStoreError(f"{self._where}: {exc}") from exc
        return {key: value for key, value in zip(keys, values, strict=True) if value is not None}

    async def put_many(self, items: Mapping[str, bytes]) -> None:
        if not items:
            return
        pairs = [part for key, value in items.items() for part in (key, value)]
        try:
            await self._put(keys=[_INDEX, _SIZES, _BYTES], args=[
                time.time(), self._bounds.max_age_seconds, self._bounds.max_bytes, PREFIX, *pairs])
        except RedisError as exc:
            raise StateStoreError(f"{self._where}: {exc}") from exc

    async def problem(self) -> str | None:
        """None when Redis answers; else why not, for /health. Bounded well below an orchestrator's probe
        timeout (Kubernetes: 1 s): a Redis that does not answer must not make every replica unready."""
        try:
            with anyio.fail_after(HEALTH_PING_TIMEOUT):
                await self._client.ping()
        except TimeoutError:
            return f"{self._where}: no answer within {HEALTH_PING_TIMEOUT:g} s"
        except RedisError as exc:
            return f"{self._where}: {exc}"
        return None

    async def aclose(self) -> None:
        await self._client.aclose()


def _without_password(url: str) -> str:
    """The URL as logs and /health may show it: redis://host:port/db, never its credentials."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.rsplit('@', 1)[-1]}"
