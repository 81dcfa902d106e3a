"""The catalogue's rebuilds (app/mcp/rebuilds.py): in a worker thread while the event loop goes on, one at a time, the
latest change in force last, and what failed leaving the last good one. The builds here wait for the test to let
them end (threading events), so the loop's part is shown by what it does meanwhile, never by timing."""

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import pytest

from app.mcp.rebuilds import Rebuilds

pytestmark = pytest.mark.anyio
LIMIT = 10


@dataclass
class Builds:
    """What the builds read (`version`), each build held until the test releases it, and what was installed."""

    version: int = 0
    started: list[threading.Event] = field(default_factory=list)
    released: list[threading.Event] = field(default_factory=list)
    installed: list[int] = field(default_factory=list)
    on_loop: list[bool] = field(default_factory=list)  # per build: whether it ran where an event loop runs
    failing: bool = False
    took: anyio.Event = field(default_factory=anyio.Event)  # set and replaced each time a build takes what it reads

    def take(self) -> Callable[[], int]:
        read, started, released = self.version, threading.Event(), threading.Event()
        self.started.append(started)
        self.released.append(released)
        failing = self.failing
        self.took.set()
        self.took = anyio.Event()

        def build() -> int:
            self.on_loop.append(asyncio._get_running_loop() is not None)
            started.set()
            if not released.wait(LIMIT):  # on the loop, nobody could release it: it ends unreleased instead
                return -1
            if failing:
                raise RuntimeError("the conversion broke")
            return read

        return build

    async def running(self, number: int) -> None:
        """Returns once build `number` (from 1) runs: waited for in another thread, the loop stays free."""
        while len(self.started) < number:
            await self.took.wait()
        assert await anyio.to_thread.run_sync(self.started[number - 1].wait, LIMIT)


@asynccontextmanager
async def builder(builds: Builds) -> AsyncIterator[Rebuilds[int]]:
    rebuilds = Rebuilds(builds.take, builds.installed.append)
    async with anyio.create_task_group() as group:
        group.start_soon(rebuilds.run)
        with anyio.fail_after(LIMIT):
            yield rebuilds
        for released in builds.released:
            released.set()
        group.cancel_scope.cancel()


async def test_a_build_runs_in_a_worker_thread_while_the_event_loop_goes_on() -> None:
    builds = Builds(version=1)
    async with builder(builds) as rebuilds:
        rebuilds.ask()
        await builds.running(1)
        builds.released[0].set()  # the loop runs this while the build waits for it (on the loop, it would not)
        await rebuilds.caught_up()
    assert builds.installed == [1] and builds.on_loop == [False]


async def test_changes_asked_during_a_build_are_taken_up_together_by_the_next_and_the_latest_stays() -> None:
    builds = Builds(version=1)
    async with builder(builds) as rebuilds:
        rebuilds.ask()
        await builds.running(1)
        for version in (2, 3):  # two lists change while the first build runs
            builds.version = version
            rebuilds.ask()
        waiting = anyio.Event()

        async def wait_for_all() -> None:
            await rebuilds.caught_up()
            waiting.set()

        async with anyio.create_task_group() as group:
            group.start_soon(wait_for_all)
            builds.released[0].set()
            await builds.running(2)
            assert builds.installed == [1] and not waiting.is_set()  # the first is in force; 3 not yet
            builds.released[1].set()
        assert waiting.is_set()
    assert builds.installed == [1, 3] and len(builds.started) == 2


async def test_caught_up_returns_at_once_when_nothing_is_asked() -> None:
    builds = Builds()
    async with builder(builds) as rebuilds:
        await rebuilds.caught_up()
    assert builds.started == []


async def test_a_failed_build_keeps_what_is_in_force_and_the_next_change_builds_again() -> None:
    builds = Builds(version=1)
    async with builder(builds) as rebuilds:
        rebuilds.ask()
        await builds.running(1)
        builds.released[0].set()
        await rebuilds.caught_up()
        builds.version, builds.failing = 2, True
        rebuilds.ask()
        await builds.running(2)
        builds.released[1].set()
        await rebuilds.caught_up()  # its waiters go on
        builds.version, builds.failing = 3, False
        rebuilds.ask()
        await builds.running(3)
        builds.released[2].set()
        await rebuilds.caught_up()
    assert builds.installed == [1, 3]
