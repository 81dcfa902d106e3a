"""The fast lane (tests/support/lanes.py): what marks a test slow, and the guard that fails a pure test that
starts a process or opens a socket all the same."""

import socket
import subprocess
import sys
import threading

import pytest

from tests.support import lanes
from tests.support.lanes import FastLaneViolation, no_processes_or_sockets


def _pure() -> int:
    return 1 + 1  # a comment naming a ServerThread starts nothing


def _starts_a_server() -> None:
    _helper_that_starts()


def _helper_that_starts() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))


def test_what_is_slow_is_read_from_the_code_and_its_helpers() -> None:
    assert not lanes._starts_something(_pure)
    assert lanes._starts_something(_helper_that_starts)
    assert lanes._starts_something(_starts_a_server)  # through the helper it calls


def test_the_guard_refuses_processes_and_sockets_and_says_which_test() -> None:
    with no_processes_or_sockets("tests/x.py::test_y") as violations:
        with pytest.raises(FastLaneViolation), socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
        with pytest.raises(FastLaneViolation):
            subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert len(violations) == 2 and all(v.startswith("tests/x.py::test_y ") for v in violations)
    assert "not marked slow" in violations[0]


def test_the_guard_leaves_earlier_threads_alone_and_goes_away() -> None:
    ready, done = threading.Event(), threading.Event()
    bound: list[int] = []

    def earlier_server() -> None:  # a session's server, started before the test
        ready.wait()
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            bound.append(sock.getsockname()[1])
        done.set()

    thread = threading.Thread(target=earlier_server, daemon=True)
    thread.start()
    with no_processes_or_sockets("t") as violations:
        ready.set()
        assert done.wait(10)
    thread.join(10)
    assert bound and not violations
    with socket.socket() as sock:  # restored
        sock.bind(("127.0.0.1", 0))
