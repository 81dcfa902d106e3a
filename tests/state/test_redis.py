"""The Redis store against a real redis-server: values, the age bound as TTLs, the size bound, an outage."""

import socket
import time
from collections.abc import Iterator

import anyio
import pytest

import app.state.redis
from app.settings import Settings
from app.state.redis import HEALTH_PING_TIMEOUT, PREFIX, SOCKET_TIMEOUT, RedisStore
from app.state.store import Bounds, StateStoreError
from tests.support.replica_services import RedisServer

pytestmark = pytest.mark.anyio


@pytest.fixture
def server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    yield server
    server.stop()


async def test_values_come_back_and_missing_keys_are_left_out(server: RedisServer) -> None:
    store = RedisStore(server.url, Bounds(max_bytes=10_000, max_age_seconds=3600))
    await store.put_many({"turn:a": b"one", "turn:b": b"two"})
    assert await store.get_many(["turn:a", "turn:b", "turn:c"]) == {"turn:a": b"one", "turn:b": b"two"}
    assert await store.problem() is None
    await store.aclose()


async def test_every_entry_expires_at_the_age_bound(server: RedisServer) -> None:
    store = RedisStore(server.url, Bounds(max_bytes=10_000, max_age_seconds=90))
    await store.put_many({"turn:a": b"x"})
    ttl = server.client().pttl(PREFIX + "turn:a")
    assert 85_000 < ttl <= 90_000
    await store.aclose()


async def test_past_the_size_bound_the_oldest_go_first(server: RedisServer) -> None:
    store = RedisStore(server.url, Bounds(max_bytes=1_000, max_age_seconds=3600))
    for number in range(30):  # 30 entries of 100 bytes: room for 10
        await store.put_many({f"turn:{number}": bytes(100)})
    kept = await store.get_many([f"turn:{number}" for number in range(30)])
    assert sorted(kept, key=lambda key: int(key.split(":")[1])) == [f"turn:{n}" for n in range(20, 30)]
    assert int(server.client().get(PREFIX + "bytes")) == 1_000
    await store.put_many({"turn:29": bytes(50)})  # a key written again keeps its first value and size
    assert int(server.client().get(PREFIX + "bytes")) == 1_000
    assert (await store.get_many(["turn:29"]))["turn:29"] == bytes(100)
    await store.aclose()


async def test_an_outage_is_an_error_the_caller_survives_and_it_recovers(server: RedisServer) -> None:
    store = RedisStore(server.url, Bounds(max_bytes=10_000, max_age_seconds=3600))
    await store.put_many({"turn:a": b"before"})
    server.stop()
    started = time.monotonic()
    with pytest.raises(StateStoreError, match=r"127\.0\.0\.1"):
        await store.get_many(["turn:a"])
    assert time.monotonic() - started < SOCKET_TIMEOUT + 1
    assert "127.0.0.1" in (await store.problem() or "")
    server.start()  # a fresh, empty Redis on the same port
    await store.put_many({"turn:b": b"after"})
    assert await store.get_many(["turn:a", "turn:b"]) == {"turn:b": b"after"}
    assert await store.problem() is None
    await store.aclose()


def test_a_redis_url_keeps_its_password_out_of_what_is_shown() -> None:
    store = RedisStore("redis://:s3cret-pw@127.0.0.1:1/0", Bounds(max_bytes=1, max_age_seconds=1))
    assert "s3cret" not in store._where and store._where == "redis://127.0.0.1:1/0"


def test_a_redis_password_is_one_of_the_secrets_the_log_redacts() -> None:
    settings = Settings.load(_env_file=None, state_url="redis://:s3cret-pw@redis:6379/0")
    assert "s3cret-pw" in settings.secrets()


async def test_health_hears_of_a_redis_that_never_answers_within_its_bound() -> None:
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        store = RedisStore(f"redis://127.0.0.1:{silent.getsockname()[1]}/0",
                           Bounds(max_bytes=10, max_age_seconds=10))
        started = time.monotonic()
        problem = await store.problem()
        assert time.monotonic() - started < HEALTH_PING_TIMEOUT + 0.5
        assert problem is not None and "no answer within 0.5 s" in problem
        await store.aclose()


async def test_an_owner_past_its_share_forgets_its_own_oldest_not_anothers(server: RedisServer) -> None:
    store = RedisStore(server.url, Bounds(max_bytes=4_000, max_age_seconds=3600))  # a share: 1,000 bytes
    await store.put_many({"turn:victim": bytes(500)}, owner="b")
    for number in range(20):
        await store.put_many({f"turn:{number}": bytes(200)}, owner="a")
    kept = await store.get_many(["turn:victim", *[f"turn:{n}" for n in range(20)]])
    assert sorted(kept, key=lambda key: (key != "turn:victim", key)) == [
        "turn:victim", "turn:15", "turn:16", "turn:17", "turn:18", "turn:19"]
    assert int(server.client().hget(PREFIX + "owned", "a")) == 1_000
    await store.aclose()


async def test_a_bounded_read_takes_values_in_order_while_they_fit_and_marks_the_rest(server: RedisServer) -> None:
    store = RedisStore(server.url, Bounds(max_bytes=10_000, max_age_seconds=3600))
    await store.put_many({"new": bytes(600), "old": bytes(600), "small": b"1"})
    assert await store.get_many(["new", "old", "small", "absent"], max_bytes=1000) == {
        "new": bytes(600), "old": b"", "small": b"1"}
    await store.aclose()


async def test_after_a_timeout_calls_skip_redis_until_a_probe_gets_an_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(app.state.redis, "SOCKET_TIMEOUT", 0.3)
    monkeypatch.setattr(app.state.redis, "BREAKER_SECONDS", 0.5)
    with socket.socket() as silent:  # accepts connections and never answers: a stopped Redis
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        store = RedisStore(f"redis://127.0.0.1:{silent.getsockname()[1]}/0", Bounds(max_bytes=10, max_age_seconds=10))
        with pytest.raises(StateStoreError, match=r"[Tt]imeout"):
            await store.get_many(["turn:a"])
        started = time.monotonic()
        with pytest.raises(StateStoreError, match="skipped"):
            await store.put_many({"turn:a": b"x"})
        assert time.monotonic() - started < 0.2  # refused at once, not another timeout
        store.breaker._opened_at = time.monotonic() - 1  # the pause is over: the next call is the probe
        with pytest.raises(StateStoreError, match=r"[Tt]imeout"):
            await store.get_many(["turn:a"])
        with pytest.raises(StateStoreError, match="skipped"):  # the probe failed: open again
            await store.get_many(["turn:a"])
        await store.aclose()


async def test_two_replicas_claiming_one_key_at_once_one_wins(server: RedisServer) -> None:
    bounds = Bounds(max_bytes=10_000, max_age_seconds=3600)
    replicas = [RedisStore(server.url, bounds), RedisStore(server.url, bounds)]
    won: list[bool] = []

    async def claim(store: RedisStore) -> None:
        won.append(await store.claim("resumed:turn", "alice"))

    async with anyio.create_task_group() as group:
        for _ in range(4):
            for store in replicas:
                group.start_soon(claim, store)
    assert sorted(won) == [False] * 7 + [True]
    assert await replicas[1].get_many(["resumed:turn"]) == {"resumed:turn": b"1"}
    for store in replicas:
        await store.aclose()
