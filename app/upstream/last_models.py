"""The upstream's last model list that worked, served while the upstream cannot answer.

Open WebUI drops a connection's models when their list fails, and so never sends the chat that would have carried
the gateway's "start LM Studio's local server" (issue 45): "Model '' was not found" is all the person reads. So
while the upstream cannot answer, `/v1/models` and the other doors' lists are made of the last list it gave, kept
in the state store (sealed; shared by replicas and kept across restarts; with `none`, in this process alone).

The store never overwrites a name, so a list is written under the minute it was fetched, with a mark under its
hour and its day: finding the latest takes three reads (the days of the store's default age bound, that day's
hours, that hour's minutes), once per process. A list is written again only when it changed, or half a day later
so that the age bound does not forget it.
"""

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, TypedDict

import structlog

from app.state import StateStore, StateStoreError

log = structlog.get_logger("toolbridge.upstream")

SLOTS = (86_400, 3_600, 60)  # a day, an hour, a minute: marks under the first two, the list under the last
SEARCH_DAYS = 31  # the state store forgets after 30 days by default (TOOLBRIDGE_STATE_MAX_AGE_DAYS)
REWRITE_SECONDS = 12 * 3_600
MAX_LIST_BYTES = 1 << 20
ASK_AGAIN_SECONDS = 60.0  # a store that had no list is asked again after this: another replica may write one
HEADER = "X-Toolbridge-Model-List"  # on a list served from memory: `last-known; fetched_at=...`
_MARK = b"1"
_STAMP = struct.Struct(">d")  # the time it was fetched, before the list's bytes


class ListServed(TypedDict):
    """For /health's `upstream.model_list`: the upstream's own lists, or the last it gave; when that was fetched."""

    served: Literal["live", "last_known"]
    fetched_at: float


@dataclass(frozen=True)
class ModelList:
    """A model list to answer with: the upstream's (status, headers, body), or the last one it gave
    (`last_known_at`: when it was fetched)."""

    status: int
    headers: dict[str, str]
    body: bytes
    last_known_at: float | None = None


@dataclass
class LastModels:
    """The last list of one upstream (`url`), in this process and in `store`."""

    url: str
    store: StateStore | None
    clock: Callable[[], float] = time.time
    known: tuple[bytes, float] | None = None  # the list and when it was fetched
    serving: bool = False  # the lists answered now are the last known one
    _written: tuple[bytes, float] | None = field(default=None, repr=False)
    _asked_at: float | None = field(default=None, repr=False)

    async def remember(self, body: bytes) -> None:
        """A list the upstream just gave."""
        now = self.clock()
        self.known, self.serving = (body, now), False
        if self.store is None or len(body) > MAX_LIST_BYTES:
            return
        if self._written is not None and self._written[0] == body and now - self._written[1] < REWRITE_SECONDS:
            return
        self._written = (body, now)
        slots = [int(now // seconds) for seconds in SLOTS]
        try:
            await self.store.put_many({self._key(len(SLOTS) - 1, slots[-1]): _STAMP.pack(now) + body})
            # After the list: a mark never leads to a minute that has none.
            await self.store.put_many({self._key(level, slot): _MARK for level, slot in enumerate(slots[:-1])})
        except StateStoreError as exc:
            log.warning("upstream_models_not_kept", error=str(exc), effect="kept in this process only")

    async def answer(self, why: str) -> ModelList | None:
        """The last list as the answer to a model list the upstream could not give (`why`); None when there is
        none. Said in the log once, when the upstream's own list stops coming."""
        known = await self._recall()
        if known is None:
            return None
        body, fetched_at = known
        when = _iso(fetched_at)
        if not self.serving:
            log.warning("upstream_models_last_known", url=self.url, fetched_at=when, reason=why,
                        effect="model lists answered with the last one the upstream gave, until it answers")
            self.serving = True
        headers = {"content-type": "application/json", HEADER: f"last-known; fetched_at={when}"}
        return ModelList(200, headers, body, fetched_at)

    def describe(self) -> ListServed | None:
        """For /health: whether the lists served are the upstream's or the last known, and when it was fetched."""
        if self.known is None:
            return None
        return {"served": "last_known" if self.serving else "live", "fetched_at": self.known[1]}

    async def _recall(self) -> tuple[bytes, float] | None:
        now = self.clock()
        if self.known is not None or self.store is None:
            return self.known
        if self._asked_at is not None and now - self._asked_at < ASK_AGAIN_SECONDS:
            return None
        self._asked_at = now
        try:
            found = await self._latest(self.store, now)
        except StateStoreError as exc:
            log.warning("upstream_models_not_read", error=str(exc))
            return None
        if self.known is None:  # a live list that came meanwhile wins
            self.known = found
        return self.known

    async def _latest(self, store: StateStore, now: float) -> tuple[bytes, float] | None:
        """The newest list in the store: the newest day marked, its newest hour marked, that hour's newest list."""
        today = int(now // SLOTS[0])
        candidates = range(today, today - SEARCH_DAYS, -1)
        for level, seconds in enumerate(SLOTS):
            keys = {self._key(level, slot): slot for slot in candidates}
            found = await store.get_many(list(keys))
            newest = next((key for key in keys if found.get(key)), None)
            if newest is None:
                return None
            if level == len(SLOTS) - 1:
                value = found[newest]
                return value[_STAMP.size:], _STAMP.unpack(value[:_STAMP.size])[0]
            slot, parts = keys[newest], seconds // SLOTS[level + 1]
            candidates = range((slot + 1) * parts - 1, slot * parts - 1, -1)
        return None

    def _key(self, level: int, slot: int) -> str:
        return f"models:{self.url}:{level}:{slot}"


def _iso(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
