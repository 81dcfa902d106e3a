"""Rendering of tool activity for people, and its removal from history, rule by rule."""

import html
import json
import re
from dataclasses import dataclass
from typing import Any

import pytest

from app.trace import render_finished, render_started, strip_trace


@dataclass
class C:
    id: str
    name: str
    arguments: str


@dataclass
class Out:
    content: str
    is_error: bool = False
    data: Any = None
    error_message: str | None = None


CALL = C("call_1", "time__get_current_time", '{"timezone": "UTC"}')
OK_DATA = {"datetime": "2026-11-22T02:00:00+00:00"}
OK = Out(json.dumps({"status": "success", "data": OK_DATA}), data=OK_DATA)
FAILED = Out(json.dumps({"status": "error", "data": {"error": "tool_error", "message": "bad zone\nreally"}}), True,
             error_message="bad zone\nreally")


def test_reasoning_trace_shows_the_call_then_the_outcome() -> None:
    started = render_started("reasoning", [CALL])
    assert started is not None and started.channel == "reasoning"
    assert started.text == 'Calling time__get_current_time({"timezone": "UTC"})\n'
    finished = render_finished("reasoning", [CALL, CALL], [OK, FAILED], [12.3, 4])
    assert finished is not None
    assert finished.text == (
        'time__get_current_time ok in 12 ms: {"datetime": "2026-11-22T02:00:00+00:00"}\n'
        "time__get_current_time failed in 4 ms: bad zone really\n"
    )


def test_details_trace_is_open_webuis_block_with_escaped_attributes() -> None:
    finished = render_finished("details", [CALL], [FAILED], [7])
    assert finished is not None and finished.channel == "content"
    block = finished.text
    assert block.startswith('\n<details type="tool_calls" done="true" id="call_1" name="time__get_current_time"')
    assert block.endswith('>\n<summary>Tool Executed</summary>\n</details>\n')
    opening = block.splitlines()[1]
    attributes = dict(re.findall(r'(\w+)="([^"]*)"', opening))
    assert json.loads(html.unescape(attributes["arguments"])) == {"timezone": "UTC"}
    assert json.loads(html.unescape(attributes["result"])) == "Error: bad zone\nreally"
    ok_block = render_finished("details", [CALL], [OK], [7])
    assert ok_block is not None
    ok_attributes = dict(re.findall(r'(\w+)="([^"]*)"', ok_block.text.splitlines()[1]))
    assert json.loads(html.unescape(ok_attributes["result"])) == {"datetime": "2026-11-22T02:00:00+00:00"}
    assert "\n" not in opening and "&#10;" not in attributes["result"]  # the \n stays JSON-escaped


def test_markdown_trace_is_one_quoted_line_per_call() -> None:
    finished = render_finished("markdown", [CALL], [OK], [5])
    assert finished is not None
    assert finished.text == (
        '\n> 🔧 `time__get_current_time` {"timezone": "UTC"} → ok: {"datetime": "2026-11-22T02:00:00+00:00"} (5 ms)\n\n'
    )


@pytest.mark.parametrize("mode", ["details", "markdown", "off"])
def test_only_reasoning_shows_calls_before_they_finish(mode: str) -> None:
    assert render_started(mode, [CALL]) is None  # type: ignore[arg-type]


def test_off_shows_nothing() -> None:
    assert render_finished("off", [CALL], [OK], [1]) is None


@pytest.mark.parametrize("mode", ["details", "markdown"])
def test_traces_are_stripped_from_history(mode: str) -> None:
    trace = render_finished(mode, [CALL, CALL], [OK, FAILED], [1, 2])  # type: ignore[arg-type]
    assert trace is not None
    assert strip_trace(f"Let me check.{trace.text}It is 2 o'clock.") in ("Let me check.It is 2 o'clock.",
                                                                       "Let me check.\nIt is 2 o'clock.")
    assert strip_trace("no trace here\n") == "no trace here\n"
