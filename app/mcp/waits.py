"""Waiting for whichever of several things happens first (shutdown, a stop, a lost connection, a sign-in)."""

from collections.abc import Awaitable, Callable
from typing import Any

import anyio


async def first_of(*waits: Callable[[], Awaitable[Any]]) -> None:
    """Returns as soon as any of the waits returns."""
    async with anyio.create_task_group() as group:
        async def run(wait: Callable[[], Awaitable[Any]]) -> None:
            await wait()
            group.cancel_scope.cancel()

        for wait in waits:
            group.start_soon(run, wait)
