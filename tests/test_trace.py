"""Rendering of tool activity for people, and its removal from history, rule by rule."""

import html
import json
import re
from dataclasses import dataclass
from typing import Any

import pytest

from app.trace import RecordedCall, read_back, render_finished, render_started, strip_trace


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


def details(calls: list[C], outputs: list[Out]) -> str:
    finished = render_finished("details", calls, outputs, [5] * len(calls))
    assert finished is not None
    return finished.text


def test_a_details_block_reads_back_as_the_call_and_the_result_it_showed() -> None:
    tricky = C("call_2", "files__read", '{"path": "a \\"quoted\\" <name> & more\\nline"}')
    text = "Let me look." + details([CALL, tricky], [OK, FAILED]) + "Done."
    assert read_back(text) == [
        "Let me look.",
        [RecordedCall("call_1", CALL.name, CALL.arguments, OK_DATA, failed=False, cut=False),
         RecordedCall("call_2", "files__read", tricky.arguments, "bad zone\nreally", failed=True, cut=False)],
        "Done.",
    ]


def test_blocks_with_words_between_them_are_separate_rounds() -> None:
    text = details([CALL], [OK]) + "Now the second." + details([CALL], [OK]) + "All done."
    parts = read_back(text)
    assert parts is not None
    assert [p if isinstance(p, str) else len(p) for p in parts] == ["", 1, "Now the second.", 1, "All done."]


def test_a_result_the_block_cut_reads_back_as_what_it_kept() -> None:
    big = Out("", data={"rows": ["x" * 50] * 200})  # over DETAILS_RESULT_CHARS once JSON-encoded
    [_, [call], _] = read_back(details([CALL], [big]))  # type: ignore[misc]
    assert call.cut and not call.failed
    assert isinstance(call.result, str) and call.result.startswith('{"rows": ["xxx') and call.result.endswith("…")


def test_text_without_our_blocks_has_nothing_to_read_back() -> None:
    assert read_back("Plain words, and a <details><summary>user's own</summary></details> block.") is None
