"""Rendering of tool activity for people, and its removal from history, rule by rule."""

import html
import json
import re
from dataclasses import dataclass
from typing import Any

import pytest

from app.chat.answer.trace import (
    DETAILS_RESULT_CHARS,
    RecordedCall,
    read_back,
    render_finished,
    render_not_ready,
    render_started,
    render_waiting,
    strip_trace,
)


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


def attributes_of(block: str) -> dict[str, str]:
    """A details block's attributes as Open WebUI reads them: HTML-unescaped."""
    opening = block.lstrip("\n").splitlines()[0]
    assert "\n" not in opening  # a raw line break in an attribute empties Open WebUI's widget
    return {name: html.unescape(value) for name, value in re.findall(r'(\w+)="([^"]*)"', opening)}


def test_details_trace_is_open_webuis_block_with_escaped_attributes() -> None:
    finished = render_finished("details", [CALL], [OK], [7])
    assert finished is not None and finished.channel == "content"
    block = finished.text
    assert block.startswith('\n<details type="tool_calls" done="true" id="call_1" name="time__get_current_time"')
    assert block.endswith('>\n<summary>Tool Executed</summary>\n</details>\n')
    attributes = attributes_of(block)
    assert json.loads(attributes["arguments"]) == {"timezone": "UTC"}
    assert json.loads(attributes["result"]) == {"datetime": "2026-11-22T02:00:00+00:00"}
    assert "status" not in attributes


def test_a_failed_call_is_marked_failed_where_open_webui_looks() -> None:
    # Open WebUI 0.12 shows a call as failed (red instead of its green check) for status="failed", and for a
    # result whose text starts with "Error:"; a JSON-encoded string starts with a quote and is not seen.
    finished = render_finished("details", [CALL], [FAILED], [7])
    assert finished is not None
    attributes = attributes_of(finished.text)
    assert attributes["status"] == "failed"
    assert attributes["result"] == "Error: bad zone\nreally"
    assert finished.text.endswith("<summary>Tool Failed</summary>\n</details>\n")
    said = Out("", True, error_message="Error executing tool fail: no such zone")  # the MCP SDK's own words
    [_, [call], _] = read_back(details([CALL], [said]))  # type: ignore[misc]
    assert attributes_of(details([CALL], [said]))["result"] == "Error executing tool fail: no such zone"
    assert (call.result, call.failed) == ("Error executing tool fail: no such zone", True)


@pytest.mark.parametrize("text", ["# Notes\n\nFirst line.\nSecond line.", "a\n" * 3000], ids=["short", "cut"])
def test_a_text_result_is_shown_as_its_text(text: str) -> None:
    # Open WebUI decodes `result` as JSON while it can and shows a string as text with its line breaks; a
    # JSON-encoded text cut at DETAILS_RESULT_CHARS no longer decodes, and showed its quotes and `\n`s.
    finished = render_finished("details", [CALL], [Out(text, data=text)], [7])
    assert finished is not None
    result = attributes_of(finished.text)["result"]
    assert result == (text if len(text) <= DETAILS_RESULT_CHARS else text[:DETAILS_RESULT_CHARS] + "…")
    assert "\\n" not in result and not result.startswith('"')


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


def test_text_and_long_failures_read_back_as_they_were() -> None:
    note = Out("", data="line one\nline two")
    long_failure = Out("", True, error_message="x" * (DETAILS_RESULT_CHARS + 50))
    [_, [text, failure], _] = read_back(details([CALL, CALL], [note, long_failure]))  # type: ignore[misc]
    assert (text.result, text.failed, text.cut) == ("line one\nline two", False, False)
    assert failure.failed and failure.cut and failure.result.startswith("xxx")
    legacy = '<details type="tool_calls" done="true" id="c" name="t" arguments="{}" result="&quot;Error: gone&quot;">'
    [_, [old], _] = read_back(f"\n{legacy}\n<summary>Tool Executed</summary>\n</details>\n")  # type: ignore[misc]
    assert (old.result, old.failed) == ("gone", True)  # blocks earlier versions wrote still read back


def test_text_without_our_blocks_has_nothing_to_read_back() -> None:
    assert read_back("Plain words, and a <details><summary>user's own</summary></details> block.") is None


# Issue 45's C8: Open WebUI spun its tool widget of a waiting call (done="false") for good, after the call ran.
def test_a_waiting_call_is_a_finished_neutral_block_open_webui_shows_without_a_spinner() -> None:
    waiting = render_waiting("details", [CALL])
    assert waiting is not None and waiting.channel == "content"
    assert waiting.text == ('\n<details data-toolbridge="waiting" data-name="time__get_current_time" '
                            'data-arguments="{&quot;timezone&quot;: &quot;UTC&quot;}">\n'
                            "<summary>time__get_current_time: waiting for your approval</summary>\n\n"
                            "Not run yet: it runs if you reply **yes**.\n</details>\n")
    answer = render_waiting("details", [CALL], for_answer=True)
    assert answer is not None and "waiting for your answer</summary>" in answer.text
    assert 'type="tool_calls"' not in waiting.text and "done=" not in waiting.text  # not Open WebUI's tool widget


def test_a_waiting_block_leaves_the_history_and_reads_back_as_no_call() -> None:
    # As Open WebUI sends the question back.
    waiting = ('\n<details data-toolbridge="waiting">\n<summary>files__delete: waiting for your approval</summary>\n\n'
               "Not run yet: it runs if you reply **yes**.\n</details>\n")
    text = "Let me look." + details([CALL], [OK]) + waiting + "\nThe model wants to run a tool."
    assert strip_trace(text) == "Let me look.\nThe model wants to run a tool."
    parts = read_back(text)
    assert parts is not None and [p if isinstance(p, str) else [c.id for c in p] for p in parts] == [
        "Let me look.", ["call_1"], waiting + "\nThe model wants to run a tool."]
    # What earlier versions wrote for a waiting call reads back as none too.
    old = ('\n<details type="tool_calls" done="false" id="c" name="t" arguments="{}">\n<summary>Waiting</summary>\n'
           "</details>\n")
    assert read_back("Asked." + old) is None and strip_trace("Asked." + old) == "Asked."
    # Another's details block, before or between ours, stays as it is.
    reasoning = '<details type="reasoning" done="true">\n<summary>Thought</summary>\n</details>\n'
    assert strip_trace(reasoning + waiting + "Asked.") == reasoning + "Asked."


@pytest.mark.parametrize(("mode", "channel"), [("reasoning", "reasoning"), ("off", "reasoning"),
                                               ("markdown", "content"), ("details", "content")])
def test_servers_whose_tools_are_missing_are_said_and_stripped_again(mode: str, channel: str) -> None:
    said = render_not_ready(mode, [("time", "is still starting"), ("fs\nx", "failed to start")])  # type: ignore[arg-type]
    assert said.channel == channel
    assert "MCP server 'time' is still starting: its tools are missing from this answer." in said.text
    assert "MCP server 'fs x' failed to start" in said.text  # one line, whatever the name holds
    if channel == "content":
        assert strip_trace(said.text + "It is noon.") == "It is noon."
