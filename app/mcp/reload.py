"""Reloads of mcp.json: when to ask for one (its files were written), one at a time, a file that fails leaving the
last good one in force, and what one changes (which servers stop and which start; pure, so it is tested by tables).
The pool applies them. The keys file's watcher is this one too."""

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import structlog
from watchfiles import Change, awatch

from app.mcp.config import McpConfig, McpConfigError, ServerConfig

log = structlog.get_logger("toolbridge.mcp")


@dataclass(frozen=True)
class ConfigDiff:
    stopping: list[str]  # removed, or changed: a changed server is stopped and started again
    starting: list[str]  # new, or changed
    unchanged: int


def diff_configs(old: Mapping[str, ServerConfig], new: Mapping[str, ServerConfig]) -> ConfigDiff:
    stopping = [name for name, server in old.items() if new.get(name) != server]
    starting = [name for name, server in new.items() if old.get(name) != server]
    return ConfigDiff(stopping, starting, len(old) - len(stopping))


class ConfigReloads:
    """Reloads asked for (a save, SIGHUP), run one at a time. A file that fails keeps the last good config in force;
    why it failed is kept (`problem`, for /health) until a good file is read."""

    def __init__(self, load: Callable[[], McpConfig]) -> None:
        self._load = load
        self._requested = anyio.Event()
        self.problem: str | None = None

    def request(self) -> None:
        self._requested.set()

    async def run(self, apply: Callable[[McpConfig], Awaitable[None]]) -> None:
        while True:
            await self._requested.wait()
            self._requested = anyio.Event()
            try:
                new = await anyio.to_thread.run_sync(self._load)
            except McpConfigError as exc:
                self.problem = str(exc)
                log.error("mcp_config_reload_failed", error=self.problem, effect="the last good config stays in force")
                continue
            self.problem = None
            await apply(new)


async def request_on_change(paths: Sequence[Path], request_reload: Callable[[], None]) -> None:
    """Asks for a reload whenever one of the config files is written (TOOLBRIDGE_WATCH_CONFIG). Only those files:
    the folders they are in may hold busy files, the gateway's own log among them, whose every write would wake
    this loop and, were it logged, write the log again."""
    folders = sorted({str(path.parent) for path in paths if path.parent.exists()})
    watched = {str(path) for path in paths}

    def ours(_change: Change, changed: str) -> bool:
        return changed in watched

    # awatch waits for changes in a thread that cancelling does not interrupt (up to 5 s): a stop event set the
    # moment this task is cancelled ends that wait at once, so a gateway that watches a file stops without it.
    stop = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(_set_when_cancelled, stop)
        async for changes in awatch(*folders, watch_filter=ours, debounce=200, recursive=False, stop_event=stop):
            log.debug("config_file_changed", files=sorted(changed for _, changed in changes))
            request_reload()
        group.cancel_scope.cancel()


async def _set_when_cancelled(stop: anyio.Event) -> None:
    try:
        await anyio.sleep_forever()
    finally:
        stop.set()
