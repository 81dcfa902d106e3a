"""The catalogue rebuilt off the event loop, in order: a rebuild converts every tool of every server (0.2-0.5 s at
1,000 tools on two cores), which on the event loop held every request and /health that long, once for each server
that became ready or stopped.

One task builds, one build at a time, in a worker thread: what a build reads (the servers' offers) is taken on the
loop when it starts, and what it makes is put in force on the loop, whole, when it ends, so that nothing reads a
catalogue half built and a later tool list is never replaced by an earlier one. Changes asked for while a build
runs are taken up together by the next one. `caught_up` waits until what was asked before it is in force: a server
shows ready only once its tools are offered.
"""

from collections.abc import Callable
from typing import Generic, TypeVar

import anyio
import structlog

log = structlog.get_logger("toolbridge.mcp")

Built = TypeVar("Built")


class Rebuilds(Generic[Built]):
    def __init__(self, take: Callable[[], Callable[[], Built]], install: Callable[[Built], None]) -> None:
        """`take`, on the loop: what a build reads, taken now, and the build (run in a worker thread); `install`,
        on the loop: its result put in force."""
        self._take, self._install = take, install
        self._asked = 0  # rebuilds asked for so far
        self._done = 0  # of those, how many the build in force took up
        self._wanted = anyio.Event()
        self._finished = anyio.Event()  # set and replaced as each build ends

    def ask(self) -> None:
        """Something a build reads changed: a build starts once the one running (if any) has ended."""
        self._asked += 1
        self._wanted.set()

    async def caught_up(self) -> None:
        """Returns once every change asked for so far is in force (at once when none is waiting)."""
        asked = self._asked
        while self._done < asked:
            await self._finished.wait()

    async def run(self) -> None:
        """The builder: runs for as long as the pool does (cancelled with it)."""
        while True:
            await self._wanted.wait()
            self._wanted = anyio.Event()
            taking_up = self._asked
            try:
                build = self._take()
                # Not abandoned when cancelled: a shutdown waits for the thread rather than leave it running.
                self._install(await anyio.to_thread.run_sync(build))
            except Exception:  # boundary: a build that fails leaves the catalogue in force; the next change retries
                log.exception("mcp_catalogue_build_failed")
            self._done = taking_up
            self._finished.set()
            self._finished = anyio.Event()
