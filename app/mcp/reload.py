"""Reloads of mcp.json: when to ask for one (its files were written), and what one changes (which servers
stop and which start; pure, so it is tested by tables). The pool applies them."""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog
from watchfiles import awatch

from app.mcp.config import ServerConfig

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


async def request_on_change(paths: Sequence[Path], request_reload: Callable[[], None]) -> None:
    """Asks for a reload whenever one of the config files is written (TOOLBRIDGE_WATCH_CONFIG)."""
    folders = sorted({str(path.parent) for path in paths if path.parent.exists()})
    watched = {str(path) for path in paths}
    async for changes in awatch(*folders, debounce=200, recursive=False):
        if any(changed in watched for _, changed in changes):
            log.info("mcp_config_changed", files=sorted(c for _, c in changes if c in watched))
            request_reload()
