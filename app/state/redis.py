"""The store for replicas: Redis, shared by every gateway behind a load balancer (TOOLBRIDGE_STATE_URL=redis://).

Entries live under `toolbridge:v1:` with a TTL of the age bound; the bounds are kept the way the SQLite
store keeps them (a key written once keeps its value; an owner past its share forgets its own oldest;
past the size bound the oldest of all go) by one Lua script per write (an index of keys by time, their
sizes and owners, byte counts), so replicas writing at once stay within them. The script says how many keys
it wrote, which makes `claim` atomic across replicas. A single Redis (or one behind Sentinel): the scripts
touch keys they do not declare, which Redis Cluster refuses.

Every call is bounded by SOCKET_TIMEOUT. A Redis that does not answer in time opens a circuit breaker:
for BREAKER_SECONDS every call fails at once without asking it, then one call at a time probes it again
(half-open) and the first answer closes the breaker. So a request pays at most one timeout and goes on
without memory (`StateStoreError`). Refused connections cost nothing and open nothing. `/health` pings
Redis whatever the breaker says, says `degraded` meanwhile, and its answer closes the breaker too.
"""

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeVar, cast

import anyio
import redis.asyncio as aioredis
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeout

from app.state.store import ANONYMOUS, CLAIMED, Bounds, StateStoreError

PREFIX = "toolbridge:v1:"
SOCKET_TIMEOUT = 2.0
HEALTH_PING_TIMEOUT = 0.5
BREAKER_SECONDS = 10.0  # after a timeout, how long calls skip Redis before one probes it again
_INDEX, _SIZES, _BYTES = PREFIX + "index", PREFIX + "sizes", PREFIX + "bytes"
_OWNERS, _OWNED = PREFIX + "owners", PREFIX + "owned"  # key -> its owner; owner -> its bytes
T = TypeVar("T")

# KEYS: the index (key -> time written), the sizes (key -> bytes), the byte count, the owners (key -> owner),
# the owners' byte counts (owner -> bytes). ARGV: now, the age bound (s), the size bound (bytes), the prefix,
# the owner, its share (bytes, 0: none), then key, value, key, value... Each owner has its own index, by time.
_PUT = """
local now, age, cap, prefix = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local owner, share = ARGV[5], tonumber(ARGV[6])
local function forget(key)
  local size = tonumber(redis.call('HGET', KEYS[2], key) or '0')
  local holder = redis.call('HGET', KEYS[4], key)
  redis.call('HDEL', KEYS[2], key)
  redis.call('ZREM', KEYS[1], key)
  redis.call('DEL', prefix .. key)
  redis.call('DECRBY', KEYS[3], size)
  if holder then
    redis.call('HDEL', KEYS[4], key)
    redis.call('ZREM', prefix .. 'owner:' .. holder, key)
    redis.call('HINCRBY', KEYS[5], holder, -size)
  end
end
for _, key in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - age)) do forget(key) end
local mine = prefix .. 'owner:' .. owner
local written = 0
for i = 7, #ARGV, 2 do
  local key, value = ARGV[i], ARGV[i + 1]
  -- NX: never over another request's entry; the first writer of a key keeps it.
  if redis.call('SET', prefix .. key, value, 'NX', 'PX', math.max(1, math.floor(age * 1000))) then
    redis.call('HSET', KEYS[2], key, #value)
    redis.call('ZADD', KEYS[1], now, key)
    redis.call('INCRBY', KEYS[3], #value)
    redis.call('HSET', KEYS[4], key, owner)
    redis.call('ZADD', mine, now, key)
    redis.call('HINCRBY', KEYS[5], owner, #value)
    written = written + 1
  end
end
if share > 0 then
  while tonumber(redis.call('HGET', KEYS[5], owner) or '0') > share do
    local oldest = redis.call('ZRANGE', mine, 0, 0)
    if #oldest == 0 then break end
    forget(oldest[1])
  end
end
local total = tonumber(redis.call('GET', KEYS[3]) or '0')
while total > cap do
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0)
  if #oldest == 0 then break end
  forget(oldest[1])
  total = tonumber(redis.call('GET', KEYS[3]) or '0')
end
return written
"""

# The values of the keys in ARGV (after the room, in bytes), in that order while they fit in the room:
# one that would not is not read. Returns per key its value, "" (there, no room) or false (not there).
_GET_WITHIN = """
local room, prefix, found = tonumber(ARGV[1]), ARGV[2], {}
for i = 3, #ARGV do
  local size = redis.call('STRLEN', prefix .. ARGV[i])
  if size == 0 then
    found[#found + 1] = false
  elseif size <= room then
    found[#found + 1] = redis.call('GET', prefix .. ARGV[i])
    room = room - size
  else
    found[#found + 1] = ''
  end
end
return found
"""


class Breaker:
    """Closed, open after a timeout (every call refused at once), half-open when BREAKER_SECONDS are over:
    one probe at a time goes through; an answer closes it, another timeout opens it again."""

    def __init__(self, seconds: float | None = None) -> None:
        self.seconds = BREAKER_SECONDS if seconds is None else seconds
        self._opened_at: float | None = None
        self._probing = False

    def refusal(self) -> str | None:
        """None when a call may go to Redis (and then it may be the probe); else why not."""
        if self._opened_at is None:
            return None
        wait = self._opened_at + self.seconds - time.monotonic()
        if wait <= 0 and not self._probing:
            self._probing = True
            return None
        return f"skipped: it did not answer within {SOCKET_TIMEOUT:g} s; asked again in {max(wait, 0):.0f} s"

    def answered(self) -> None:
        self._opened_at, self._probing = None, False

    def timed_out(self) -> None:
        self._opened_at, self._probing = time.monotonic(), False

    def settled(self) -> None:
        """A call ended without an answer or a timeout (refused, an error reply): a probe may go again."""
        self._probing = False


class RedisStore:
    kind = "redis"

    def __init__(self, url: str, bounds: Bounds) -> None:
        self._bounds = bounds
        self._client = aioredis.Redis.from_url(url, socket_timeout=SOCKET_TIMEOUT,
                                               socket_connect_timeout=SOCKET_TIMEOUT, retry_on_timeout=False)
        self._put = self._client.register_script(_PUT)
        self._get_within = self._client.register_script(_GET_WITHIN)
        self._where = _without_password(url)
        self.breaker = Breaker()

    async def get_many(self, keys: Sequence[str], max_bytes: int | None = None) -> dict[str, bytes]:
        if not keys:
            return {}
        unique = list(dict.fromkeys(keys))
        if max_bytes is None:
            # redis-py types values as bytes | str; this client does not decode responses, so they are bytes
            values = cast(list[bytes | None],
                          await self._call(lambda: self._client.mget([PREFIX + key for key in unique])))
        else:
            values = await self._call(lambda: self._get_within(args=[max_bytes, PREFIX, *unique]))
        return {key: value for key, value in zip(unique, values, strict=True) if value is not None}

    async def put_many(self, items: Mapping[str, bytes], owner: str = ANONYMOUS) -> None:
        if items:
            await self._put_new(items, owner)

    async def claim(self, key: str, owner: str = ANONYMOUS, mark: bytes = CLAIMED) -> bool:
        # The write script runs atomically in Redis: of two replicas claiming at once, one writes the key.
        return await self._put_new({key: mark}, owner) == 1

    async def _put_new(self, items: Mapping[str, bytes], owner: str) -> int:
        """Stores what is not there yet; how many keys were new."""
        pairs = [part for key, value in items.items() for part in (key, value)]
        share = self._bounds.owner_bytes(owner) or 0
        written = await self._call(lambda: self._put(keys=[_INDEX, _SIZES, _BYTES, _OWNERS, _OWNED], args=[
            time.time(), self._bounds.max_age_seconds, self._bounds.max_bytes, PREFIX, owner, share, *pairs]))
        return int(cast(int, written))

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
        self.breaker.answered()  # it answers again: requests need not wait for the probe
        return None

    async def _call(self, work: Callable[[], Awaitable[T]]) -> T:
        refusal = self.breaker.refusal()
        if refusal is not None:
            raise StateStoreError(f"{self._where}: {refusal}")
        try:
            result = await work()
        except RedisTimeout as exc:
            self.breaker.timed_out()
            raise StateStoreError(f"{self._where}: {exc}") from exc
        except RedisError as exc:
            self.breaker.settled()
            raise StateStoreError(f"{self._where}: {exc}") from exc
        except BaseException:  # cancelled mid-call: another may probe
            self.breaker.settled()
            raise
        self.breaker.answered()
        return result

    async def aclose(self) -> None:
        await self._client.aclose()


def _without_password(url: str) -> str:
    """The URL as logs and /health may show it: redis://host:port/db, never its credentials."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.rsplit('@', 1)[-1]}"
