"""The stores behind conversation memory: the same bounds for each, and the SQLite file's own promises
(it survives a restart, it is the owner's alone, it runs in WAL mode)."""

import sqlite3
import stat
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from app.state.open import open_state_store
from app.state.sqlite import SqliteStore
from app.state.store import Bounds, MemoryStore, StateStore, StateStoreError, parse_state_url

pytestmark = pytest.mark.anyio
ROOMY = Bounds(max_bytes=10**6, max_age_seconds=3600)


@asynccontextmanager
async def opened(kind: str, tmp_path: Path, bounds: Bounds = ROOMY) -> AsyncIterator[StateStore]:
    if kind == "memory":
        yield MemoryStore(bounds)
        return
    async with SqliteStore(tmp_path / "state.db", bounds) as store:
        yield store


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_store_returns_what_it_holds_and_leaves_out_the_rest(kind: str, tmp_path: Path) -> None:
    async with opened(kind, tmp_path) as store:
        await store.put_many({"a": b"one", "b": b"two"})
        await store.put_many({"a": b"uno"})  # a key written again keeps its first value: no one overwrites
        assert await store.get_many(["a", "b", "c"]) == {"a": b"one", "b": b"two"}
        assert await store.get_many([]) == {}


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_past_the_size_bound_the_oldest_are_forgotten_first(kind: str, tmp_path: Path) -> None:
    async with opened(kind, tmp_path, Bounds(max_bytes=1000, max_age_seconds=3600)) as store:
        for number in range(10):
            await store.put_many({f"k{number}": bytes(200)})
        kept = await store.get_many([f"k{n}" for n in range(10)])
        assert 0 < len(kept) <= 5 and "k9" in kept and "k0" not in kept
        assert sorted(kept) == [f"k{n}" for n in range(10 - len(kept), 10)]  # the newest, in a row


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_entries_older_than_the_age_bound_are_not_returned(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with opened(kind, tmp_path, Bounds(max_bytes=10**6, max_age_seconds=60)) as store:
        await store.put_many({"old": b"x"})
        later = time.time() + 61
        monkeypatch.setattr(time, "time", lambda: later)
        await store.put_many({"new": b"y"})
        assert await store.get_many(["old", "new"]) == {"new": b"y"}


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_an_owner_past_its_share_forgets_its_own_oldest_not_anothers(kind: str, tmp_path: Path) -> None:
    async with opened(kind, tmp_path, Bounds(max_bytes=4000, max_age_seconds=3600)) as store:  # a share: 1000
        await store.put_many({"victim": bytes(500)}, owner="b")
        for number in range(20):
            await store.put_many({f"flood{number}": bytes(200)}, owner="a")
        kept = await store.get_many(["victim", *[f"flood{n}" for n in range(20)]])
        flood = sorted(int(key[5:]) for key in kept if key.startswith("flood"))
        assert "victim" in kept and 0 < len(flood) <= 5 and flood == list(range(20 - len(flood), 20))
        for number in range(30):  # no keys (ANONYMOUS): one owner, bound only by the whole store
            await store.put_many({f"open{number}": bytes(200)})
        assert len(await store.get_many([f"open{n}" for n in range(30)])) > 5


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_bounded_read_takes_values_in_order_while_they_fit_and_marks_the_rest(
    kind: str, tmp_path: Path
) -> None:
    async with opened(kind, tmp_path) as store:
        await store.put_many({"new": bytes(600), "old": bytes(600), "small": b"1"})
        assert await store.get_many(["new", "old", "small", "absent"], max_bytes=1000) == {
            "new": bytes(600), "old": b"", "small": b"1"}


async def test_a_full_sqlite_disk_is_reported_as_itself_and_clears_when_a_write_succeeds(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "state.db", ROOMY) as store:
        assert await store.problem() is None
        pages = store._db().execute("PRAGMA page_count").fetchone()[0]
        store._db().execute(f"PRAGMA max_page_count={pages + 2}")  # what a full disk does, without root
        with pytest.raises(StateStoreError, match="database or disk is full") as failed:
            await store.put_many({"big": bytes(100_000)})
        assert "cannot rollback" not in str(failed.value)
        assert await store.problem() == "the last write failed: database or disk is full"
        await store.put_many({"small": b"x"})
        assert await store.problem() is None


async def test_the_sqlite_file_survives_a_restart_and_is_the_owners_alone(tmp_path: Path) -> None:
    path = tmp_path / "deeper" / "state.db"
    async with SqliteStore(path, ROOMY) as store:
        await store.put_many({"turn": b"remembered"})
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in path.parent.iterdir()}
    assert modes == {"state.db": 0o600, "state.db-wal": 0o600, "state.db-shm": 0o600}
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    with sqlite3.connect(path) as check:
        assert check.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    async with SqliteStore(path, ROOMY) as store:
        assert await store.get_many(["turn"]) == {"turn": b"remembered"}


async def test_an_existing_file_with_loose_permissions_is_made_the_owners_alone(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.touch(mode=0o644)
    path.chmod(0o644)
    async with SqliteStore(path, ROOMY):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_a_file_that_cannot_be_opened_turns_memory_off_without_stopping_the_gateway(tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the store's directory should be")
    async with open_state_store(f"sqlite:///{blocked}/state.db", ROOMY) as store:
        assert store is None


@pytest.mark.parametrize(("url", "expected"), [
    ("sqlite:///state.db", ("sqlite", Path("state.db"))),
    ("sqlite:////var/lib/toolbridge/state.db", ("sqlite", Path("/var/lib/toolbridge/state.db"))),
    ("memory://", ("memory", None)),
    ("redis://localhost:6379/0", ("redis", None)),
    ("rediss://:pw@redis.example:6380/1", ("redis", None)),
    ("none", ("none", None)),
])
def test_state_urls(url: str, expected: tuple[str, Any]) -> None:
    assert parse_state_url(url) == expected


@pytest.mark.parametrize("url", ["sqlite:///", "postgres://user:hunter2@x/y", "state.db"])
def test_state_urls_that_are_refused(url: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_state_url(url)
    assert "hunter2" not in str(refused.value)  # a URL's password is never repeated back


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_key_is_claimed_once_even_by_claims_at_the_same_time(kind: str, tmp_path: Path) -> None:
    async with opened(kind, tmp_path) as store:
        await store.put_many({"taken": b"x"})
        results = await _all_at_once([lambda: store.claim("once", "alice") for _ in range(8)])
        assert sorted(results) == [False] * 7 + [True]
        assert await store.claim("taken") is False  # a key written by put_many is claimed already
        assert await store.get_many(["taken"]) == {"taken": b"x"}  # and keeps its value


async def _all_at_once(calls: list[Any]) -> list[Any]:
    results: list[Any] = []

    async def one(call: Any) -> None:
        results.append(await call())

    async with anyio.create_task_group() as group:
        for call in calls:
            group.start_soon(one, call)
    return results
