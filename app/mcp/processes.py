"""The operating-system side of stdio servers: finding their commands, reading their stderr, and ending
whatever they leave behind (each server leads its own process group)."""

import asyncio
import contextlib
import os
import shutil
import signal
import sys
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import psutil
import structlog

log = structlog.get_logger("toolbridge.mcp")

# A server that died has flushed its stderr; this bounds the wait for our reader to catch up.
STDERR_SETTLE_TIMEOUT = 1.0

SERVER_MARKER = "TOOLBRIDGE_MCP_SERVER"  # in each stdio server's environment: its name and a nonce
STDERR_TAIL_LINES = 5
STDERR_LINE_BUFFER = 1 << 20  # a longer stderr line is dropped (a blob, not a message for the operator)
STDERR_LINE_LOGGED = 4000  # characters of a line that reach the log and /health's tail
GROUP_KILL_TIMEOUT = 2.0  # left-over helpers get this long after SIGTERM before SIGKILL


def resolve_command(command: str) -> str:
    """Finds commands installed beside toolbridge (its venv's bin) even when that venv is not on PATH."""
    if os.sep in command or shutil.which(command):
        return command
    beside = Path(sys.executable).parent / command
    return str(beside) if beside.exists() else command


@dataclass
class StderrTail:
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=STDERR_TAIL_LINES))
    closed: anyio.Event = field(default_factory=anyio.Event)

    async def hint(self) -> str:
        """The last lines, to add to an error (once the pipe closed, or a bounded wait for it)."""
        with anyio.move_on_after(STDERR_SETTLE_TIMEOUT):
            await self.closed.wait()
        return f"; stderr: {' | '.join(self.lines)}" if self.lines else ""


async def pump_stderr(server: str, read_fd: int, tail: StderrTail) -> None:
    """Logs a stdio server's stderr line by line under its name until the pipe closes. A line is buffered up
    to STDERR_LINE_BUFFER and logged up to STDERR_LINE_LOGGED characters; past the buffer the rest of it is
    dropped, and reading goes on: a pipe nobody reads fills up, and the server blocks or dies writing to it."""
    server_log = log.bind(server=server)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=STDERR_LINE_BUFFER)
    pipe = os.fdopen(read_fd, "rb", closefd=not libuv_closes_pipes(loop))
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    dropping = False  # the rest of a line past the buffer, up to its end
    try:
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.LimitOverrunError as overrun:  # past the buffer: let go of what is held of it
                if not dropping:
                    server_log.warning("mcp_server_stderr_line_too_long", limit_bytes=STDERR_LINE_BUFFER)
                await reader.readexactly(overrun.consumed)
                dropping = True
                continue
            except asyncio.IncompleteReadError as end:  # the pipe closed, maybe mid-line
                line = end.partial
            if not line:
                break
            if not dropping:
                _log_line(server_log, tail, line)
            dropping = dropping and not line.endswith(b"\n")
    finally:
        tail.closed.set()
        transport.close()


def _log_line(server_log: Any, tail: StderrTail, line: bytes) -> None:
    text = line.decode("utf-8", "replace").rstrip()
    if len(text) > STDERR_LINE_LOGGED:
        text = f"{text[:STDERR_LINE_LOGGED]}... ({len(text) - STDERR_LINE_LOGGED} more characters)"
    if text:
        tail.lines.append(text)
        server_log.info("mcp_server_stderr", line=text)


def libuv_closes_pipes(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether the loop's pipe transport closes the fd itself (uvloop: libuv does, then it closes the file
    object as well). A file object that also owned the fd would close that number a second time, after
    another thread may have opened a file under it: an unrelated open file failing with EBADF. asyncio's
    own loop closes the fd only through the file object."""
    return type(loop).__module__.split(".")[0] == "uvloop"


def session_children() -> dict[int, list[str]]:
    """Our child processes that lead their own process group (stdio servers are started that way)."""
    found = {}
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            if os.getpgid(child.pid) == child.pid:
                found[child.pid] = child.cmdline()
    return found


def spawned_since(before: dict[int, list[str]], marker: str) -> set[int]:
    """The group of the server just started: new since `before`, with `marker` as its SERVER_MARKER."""
    found = set()
    for pid in session_children().keys() - before.keys():
        with contextlib.suppress(psutil.Error):
            if psutil.Process(pid).environ().get(SERVER_MARKER) == marker:
                found.add(pid)
    return found


def run_since(before: dict[int, list[str]], args: list[str]) -> set[int]:
    """New since `before` and run with these arguments: the closest match for a process not yet marked."""
    return {pid for pid, cmdline in session_children().items()
            if pid not in before and (not args or cmdline[-len(args):] == args)}


def descendants(groups: set[int]) -> list[psutil.Process]:
    """Every process the group leaders in `groups` started, whatever group or session it went on to lead."""
    found = []
    for leader in groups:
        with contextlib.suppress(psutil.Error):
            found += psutil.Process(leader).children(recursive=True)
    return found


async def end_process_groups(groups: set[int], helpers: Sequence[psutil.Process] = ()) -> None:
    """SIGTERM, then SIGKILL after a bounded wait, to whatever is left in our servers' process groups, and to
    `helpers` found before (psutil checks a process is the same one before signalling it): what a server
    started and did not stop when it exited."""
    alive = {group for group in groups if signal_group(group, signal.SIGTERM)}
    helpers = [helper for helper in helpers if _signal_helper(helper, psutil.Process.terminate)]
    deadline = anyio.current_time() + GROUP_KILL_TIMEOUT
    while (alive or helpers) and anyio.current_time() < deadline:
        await anyio.sleep(0.05)
        alive = {group for group in alive if signal_group(group, 0)}
        helpers = [helper for helper in helpers if _running(helper)]
    for group in alive:
        log.warning("mcp_process_group_killed", process_group=group)
        signal_group(group, signal.SIGKILL)
    for helper in helpers:
        log.warning("mcp_helper_process_killed", pid=helper.pid)
        _signal_helper(helper, psutil.Process.kill)


def _signal_helper(helper: psutil.Process, send: Callable[[psutil.Process], None]) -> bool:
    try:
        send(helper)
    except psutil.Error:
        return False
    return True


def _running(helper: psutil.Process) -> bool:
    with contextlib.suppress(psutil.Error):
        return helper.is_running() and helper.status() != psutil.STATUS_ZOMBIE
    return False


def signal_group(group: int, sig: int) -> bool:
    try:
        os.killpg(group, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True
