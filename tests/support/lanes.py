"""The fast lane: which tests are `slow` (they start a server, a process or a browser, or open a socket),
found from their code so that no list of them can go stale, and a guard that fails any other test that
starts a process or opens a socket all the same.

A test is slow when its own code, a fixture it uses (directly or through other fixtures), or a helper from
the tests it calls (followed through the helpers they call) names one of `STARTERS`. `pytest -m "not slow"`
runs the rest, the pure tests, in seconds. The guard runs in every run, the full one included: a pure test
that starts a process or opens a socket after all fails, saying so; mark it `@pytest.mark.slow` or name its
starter here.
"""

import functools
import inspect
import io
import re
import socket
import subprocess
import textwrap
import threading
import tokenize
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

# Names in a test's code that start a server, a process or a browser, or open a socket.
STARTERS = re.compile(
    r"\b(ServerThread|running_gateway|raw_upstream|free_port|stdio_entry|RedisServer|subprocess|Popen"
    r"|create_subprocess_exec|create_subprocess_shell|sync_playwright|async_playwright|chromium"
    r"|socket\.socket|create_connection|open_connection|start_server|uvicorn"
    # the app's own starters: the MCP pool and its servers' processes, the app with its lifespan
    r"|McpPool|Supervisor|StdioServerConfig|sys\.executable|create_app|lifespan)\b"
)
_NAME = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")
_OWN_CODE = "tests"  # helpers are followed only inside the test suite's own modules


@functools.cache
def _starts_something(target: Callable[..., Any]) -> bool:
    """Whether `target`'s code, or that of the test helpers it names, starts anything (see STARTERS)."""
    return _reaches_a_starter(target, set())


def _reaches_a_starter(target: Any, seen: set[int]) -> bool:
    if id(target) in seen:
        return False
    seen.add(id(target))
    source = _code(target)
    if source is None:
        return False
    if STARTERS.search(source):
        return True
    module = inspect.getmodule(target)
    if module is None:
        return False
    for name in set(_NAME.findall(source)):
        helper = getattr(module, name, None)
        if _is_test_code(helper) and _reaches_a_starter(helper, seen):
            return True
    return False


def _code(target: Any) -> str | None:
    """`target`'s code without its comments, None when it has none to read; read once per run (a helper class is
    named by hundreds of tests, and inspect reads a class's source by parsing its whole module each time)."""
    try:
        return _code_once(target)
    except TypeError:  # not hashable: read it every time
        return _read_code(target)


@functools.cache
def _code_once(target: Any) -> str | None:
    return _read_code(target)


def _read_code(target: Any) -> str | None:
    try:
        return _without_comments(inspect.getsource(target))
    except (OSError, TypeError):
        return None


def _without_comments(source: str) -> str:
    """The code without its comments (a comment naming uvicorn starts nothing)."""
    lines = textwrap.dedent(source).splitlines(keepends=True)
    try:
        comments = [token.start for token in tokenize.generate_tokens(io.StringIO("".join(lines)).readline)
                    if token.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError):
        return source
    for row, column in comments:
        lines[row - 1] = lines[row - 1][:column] + "\n"
    return "".join(lines)


def _is_test_code(obj: Any) -> bool:
    if not (inspect.isfunction(obj) or inspect.isclass(obj)):
        return False
    module = getattr(obj, "__module__", "") or ""
    return module == _OWN_CODE or module.startswith(f"{_OWN_CODE}.")


def is_slow(item: pytest.Item) -> bool:
    if item.get_closest_marker("slow") is not None:
        return True
    function = getattr(item, "function", None)
    if function is not None and _starts_something(function):
        return True
    fixtures = getattr(item, "_fixtureinfo", None)
    for name in getattr(item, "fixturenames", ()):
        for definition in fixtures.name2fixturedefs.get(name, ()) if fixtures else ():
            if _starts_something(definition.func):
                return True
    return False


def mark_the_slow(items: list[pytest.Item]) -> None:
    for item in items:
        if is_slow(item):
            item.add_marker(pytest.mark.slow)


# What the guard refuses in a pure test: (owner, attribute, what it does).
_GUARDED: tuple[tuple[Any, str, str], ...] = (
    (subprocess.Popen, "_execute_child", "started a process"),  # subprocess and asyncio's subprocesses
    (socket.socket, "connect", "opened a connection"),
    (socket.socket, "connect_ex", "opened a connection"),
    (socket.socket, "bind", "bound a socket"),
)


class FastLaneViolation(RuntimeError):
    """A test not marked slow started a process or opened a socket."""


@contextmanager
def no_processes_or_sockets(nodeid: str) -> Iterator[list[str]]:
    """While a pure test runs, starting a process or opening a socket raises, and is listed in what this yields
    (the caller fails the test on it, in case the raise was swallowed). Threads that were running before the
    test (other tests' servers, kept for the session) are left alone."""
    earlier = {thread for thread in threading.enumerate() if thread is not threading.main_thread()}
    violations: list[str] = []

    def guarded(original: Callable[..., Any], what: str) -> Callable[..., Any]:
        @functools.wraps(original)
        def check(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread() not in earlier:
                message = (f"{nodeid} {what} but is not marked slow: mark it @pytest.mark.slow, or name what "
                           "started it in tests/support/lanes.py STARTERS")
                violations.append(message)
                raise FastLaneViolation(message)
            return original(*args, **kwargs)

        return check

    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in _GUARDED]
    for (owner, name, what), (_, _, original) in zip(_GUARDED, originals, strict=True):
        setattr(owner, name, guarded(original, what))
    try:
        yield violations
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)

