"""The counters behind bench/module_trace.py and bench/type_counts.py (issue 46's figures), on given input;
and the one invariant the trace locks: nothing below the HTTP layer calls into app/api/."""

from collections import Counter

import pytest

from bench.module_trace import Run, alternation_runs, calls_into_api_from_below, longest_alternation, top_pairs
from bench.type_counts import Counts, aliases_defined, count_source, find_aliases


@pytest.mark.parametrize(("sequence", "runs"), [
    ([], []),
    (["a"], []),
    (["a", "b"], [Run(("a", "b"), 1)]),
    (["a", "b", "a"], [Run(("a", "b"), 2)]),  # a call and its return
    (["a", "b", "a", "b"], [Run(("a", "b"), 3)]),
    (["a", "b", "a", "b", "a"], [Run(("a", "b"), 4)]),  # an orchestrator calling b twice
    (["a", "a", "b", "b", "a"], [Run(("a", "b"), 2)]),  # repeats are one entry
    (["a", "b", "a", "c", "a"], [Run(("a", "b"), 2), Run(("a", "c"), 2)]),  # runs share their joint
    (["b", "a", "b", "c", "b", "c", "b"], [Run(("a", "b"), 2), Run(("b", "c"), 4)]),
    (["a", "b", None, "a", "b"], [Run(("a", "b"), 1), Run(("a", "b"), 1)]),  # a break ends a run
    (["a", "b", None, None, "a"], [Run(("a", "b"), 1)]),
    ([None, "a", "b", "c"], [Run(("a", "b"), 1), Run(("b", "c"), 1)]),
])
def test_alternation_runs(sequence: list[str | None], runs: list[Run]) -> None:
    assert alternation_runs(sequence) == runs


def test_the_longest_alternation_and_the_top_pairs_over_contexts() -> None:
    sequences = [["q", "f", "q", "f", "q", "f", "q", "f"], ["a", "b", "a"], ["a", "b", "a", "b", "a"]]
    assert longest_alternation(sequences) == Run(("f", "q"), 7)
    assert top_pairs(sequences, 5) == [Run(("f", "q"), 7), Run(("a", "b"), 4)]
    assert longest_alternation([[], ["a"]]) is None


def test_calls_into_api_from_below_counts_only_lower_callers() -> None:
    calls = Counter({("main.py", "api/routes.py"): 3, ("api/doors.py", "api/routes.py"): 7,
                     ("chat/service.py", "api/routes.py"): 2, ("mcp/pool.py", "api/deps.py"): 1,
                     ("chat/service.py", "chat/streaming.py"): 9})
    assert calls_into_api_from_below(calls) == 3


def test_type_counts_on_a_source() -> None:
    source = '''
from typing import Any, Mapping
from app.doors.items import Event as Ev
import typing

Row = dict[str, Any]
def f(a: dict[str, Any], b: "dict[str, Any]", c: Ev, d: Mapping[str, Any], e: typing.Any) -> list[Any]:
    x: dict[str, object] = {}
    y: dict[int, Any] = {}
    # dict[str, Any] in a comment, and Any
    """dict[str, Any] in a docstring"""
    return [Row, Ev]
'''
    aliases = {("app.doors.items", "Event"), ("m", "Row")}
    # dict[str, Any]: Row's definition, a, b (a string); alias uses: c, Row and Ev in the body; Mapping: d
    # Any: the three dict[str, Any], Mapping's, e, list[Any], dict[int, Any]
    assert count_source(source, aliases, "m") == Counts(dict_any=3, alias_uses=3, any=7, mapping_any=1)
    assert count_source(source, aliases, "m").dicts == 7


def test_aliases_are_found_through_aliases_of_aliases() -> None:
    sources = {
        "app.a": "from typing import Any, TypeAlias\nEvent = dict[str, Any]\nBody: TypeAlias = dict[str, Any]\n"
                 "Other = dict[str, int]\n",
        "app.b": "from app.a import Event\nPart = Event\ndef g() -> None:\n    Local = Event\n",
    }
    assert aliases_defined(sources["app.a"]) == {"Event", "Body"}
    assert find_aliases(sources) == {("app.a", "Event"), ("app.a", "Body"), ("app.b", "Part")}


@pytest.mark.slow
def test_nothing_below_the_http_layer_calls_into_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """One streamed chat with one tool round, traced: the HTTP layer is only called from above it (and resumed
    by the framework pulling its stream), never called by the chat wing, the doors, MCP or the upstream."""
    from bench.module_trace import traced_chat

    trace, text, upstream_requests = traced_chat(tmp_path)
    assert upstream_requests == 2 and "echo: hello" in text
    assert any(module.startswith("api/") for module in trace.entered)
    assert calls_into_api_from_below(trace.calls) == 0
