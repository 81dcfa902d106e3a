"""The upstream's last model list, kept in a store that never overwrites a name: the newest found again by a new
process (across minutes, hours and days), written again only when it changed or half a day passed, in this
process alone without a store, and served with a header and one log line per outage."""

import json
from collections.abc import Mapping, Sequence

import pytest
import structlog

from app.state import ANONYMOUS, Bounds, MemoryStore, StateStoreError
from app.upstream.last_models import HEADER, REWRITE_SECONDS, LastModels

pytestmark = pytest.mark.anyio
URL = "http://127.0.0.1:1234/v1"
DAY = 86_400.0
START = 1_795_000_020.0  # a Unix time on a minute, 2026


def listing(*names: str) -> bytes:
    return json.dumps({"object": "list", "data": [{"id": name, "object": "model"} for name in names]}).encode()


class Clock:
    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class CountingStore(MemoryStore):
    """The in-process store, counting the entries written to it."""

    def __init__(self) -> None:
        super().__init__(Bounds(max_bytes=1 << 24, max_age_seconds=30 * DAY))
        self.written: list[str] = []

    async def put_many(self, items: Mapping[str, bytes], owner: str = ANONYMOUS) -> None:
        self.written.extend(items)
        await super().put_many(items, owner)


class BrokenStore(CountingStore):
    async def get_many(self, keys: Sequence[str], max_bytes: int | None = None) -> dict[str, bytes]:
        raise StateStoreError("disk full")

    async def put_many(self, items: Mapping[str, bytes], owner: str = ANONYMOUS) -> None:
        raise StateStoreError("disk full")


@pytest.mark.parametrize("later", [30.0, 61.0, 3_700.0, 2 * DAY + 5.0, 29 * DAY])
async def test_a_new_process_finds_the_newest_list_whenever_it_was_written(later: float) -> None:
    store, clock = CountingStore(), Clock()
    first = LastModels(URL, store, clock)
    await first.remember(listing("old-model"))
    clock.now += later
    await first.remember(listing("new-model"))
    clock.now += 3 * DAY  # a restart days later, the upstream down
    served = await LastModels(URL, store, clock).answer("upstream_unreachable")
    assert served is not None
    # Within one minute the store keeps the first list of that minute (names are never overwritten).
    assert served.body == listing("old-model" if later < 60 else "new-model")
    assert served.status == 200 and served.headers[HEADER].startswith("last-known; fetched_at=")


async def test_an_unchanged_list_is_written_again_only_after_half_a_day() -> None:
    store, clock = CountingStore(), Clock()
    last = LastModels(URL, store, clock)
    await last.remember(listing("m"))
    written = len(store.written)
    clock.now += 120
    await last.remember(listing("m"))
    assert len(store.written) == written
    clock.now += REWRITE_SECONDS
    await last.remember(listing("m"))
    assert len(store.written) == 2 * written  # the age bound does not forget a list that never changes


async def test_another_upstream_s_list_is_not_served() -> None:
    store = CountingStore()
    await LastModels(URL, store).remember(listing("m"))
    assert await LastModels("http://10.0.0.9:1234/v1", store).answer("upstream_unreachable") is None


async def test_without_a_store_the_list_lives_in_this_process_alone() -> None:
    last = LastModels(URL, None)
    assert await last.answer("upstream_unreachable") is None  # never fetched: the failure stays
    await last.remember(listing("m"))
    served = await last.answer("upstream_unreachable")
    assert served is not None and served.body == listing("m")
    assert await LastModels(URL, None).answer("upstream_unreachable") is None


async def test_a_store_that_fails_leaves_the_list_in_this_process() -> None:
    last = LastModels(URL, BrokenStore())
    assert await last.answer("upstream_unreachable") is None
    await last.remember(listing("m"))
    served = await last.answer("upstream_unreachable")
    assert served is not None and served.body == listing("m")


async def test_serving_the_last_list_is_said_once_an_outage_and_in_health() -> None:
    last = LastModels(URL, None, Clock())
    await last.remember(listing("m"))
    assert last.describe() == {"served": "live", "fetched_at": START}
    with structlog.testing.capture_logs() as logs:
        await last.answer("upstream_unreachable")
        await last.answer("upstream_unreachable")
        await last.remember(listing("m"))
        await last.answer("upstream_unreachable")
    assert [entry["event"] for entry in logs] == ["upstream_models_last_known"] * 2
    assert logs[0]["fetched_at"] == "2026-11-18T11:07:00Z" and logs[0]["reason"] == "upstream_unreachable"
    assert last.describe() == {"served": "last_known", "fetched_at": START}
