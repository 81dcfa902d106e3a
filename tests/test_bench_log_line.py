"""bench/log_line.py measures what its checkout's logging writes: a line rendered, and a call below the level."""

from pathlib import Path

import pytest

from bench.log_line import measure


@pytest.mark.slow
def test_a_line_costs_more_than_a_call_below_the_level(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path(__file__).parent.parent)  # the checkout whose `app` it measures
    line, dropped = measure("json", 200)
    assert line > dropped > 0
