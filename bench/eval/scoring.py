"""Reading what happened in one answer, and scoring it against a task. Pure.

The gateway is asked for the `details` trace (`X-Toolbridge-Trace: details`): each MCP call is a
`<details type="tool_calls" name=... arguments=...>` block in the content, with the full arguments; a call that
waits for the person's yes or answer is a `<details data-toolbridge="waiting" data-name=... data-arguments=...>`
block. The answer is the content with those blocks removed.
"""

import html
import json
import re
from dataclasses import dataclass
from typing import Any

from app.chat.answer.trace import strip_trace
from app.chat.offer.tool_discovery import FIND_TOOLS
from bench.eval.tasks import ExpectedCall, Task

_BLOCK = re.compile(r'<details (?:type="tool_calls"|data-toolbridge="waiting")([^>]*)>')
_ATTRIBUTE = re.compile(r'(?:data-)?(\w+)="([^"]*)"')


@dataclass(frozen=True)
class Observed:
    calls: list[tuple[str, dict[str, Any]]]  # (MCP tool name, arguments) in order
    answer: str


@dataclass(frozen=True)
class Score:
    passed: bool
    tool_ok: bool
    arguments_ok: bool
    answer_ok: bool


def observe(content: str, tool_of: dict[str, str],
            client_calls: list[tuple[str, dict[str, Any]]] | None = None) -> Observed:
    """The calls made (exposed names mapped back to MCP tool names by `tool_of`; the client's own tool calls,
    which end the answer, last) and the final answer."""
    calls = []
    for block in _BLOCK.finditer(content):
        attributes = {key: html.unescape(value) for key, value in _ATTRIBUTE.findall(block.group(1))}
        try:
            arguments = json.loads(attributes.get("arguments") or "{}")
        except ValueError:
            arguments = {}
        name = attributes.get("name", "")
        if name == FIND_TOOLS and name not in tool_of:
            continue  # TOOLBRIDGE_TOOL_DISCOVERY's first step: the call after it is the model's choice of tool
        calls.append((tool_of.get(name, name), arguments if isinstance(arguments, dict) else {}))
    return Observed([*calls, *(client_calls or [])], strip_trace(content).strip())


def score(task: Task, seen: Observed) -> Score:
    """Tool: the first call is to the first expected tool, or one of its alternatives (or, for plain chat, no
    call at all). Arguments:
    the expected calls were made in order with their arguments, other calls allowed between (a bad first
    try that was fixed). Answer: the facts in, the forbidden words out."""
    if task.calls is None:
        tool_ok = arguments_ok = True
    elif not task.calls:
        tool_ok = arguments_ok = not seen.calls
    else:
        tool_ok = bool(seen.calls) and seen.calls[0][0] in task.calls[0].names
        arguments_ok = tool_ok and _in_order(task.calls, seen.calls)
    answer = seen.answer.lower()
    answer_ok = (all(word.lower() in answer for word in task.answer)
                 and (not task.answer_any or any(word.lower() in answer for word in task.answer_any))
                 and not any(word.lower() in answer for word in task.answer_not))
    return Score(tool_ok and arguments_ok and answer_ok, tool_ok, arguments_ok, answer_ok)


def _in_order(expected: list[ExpectedCall], made: list[tuple[str, dict[str, Any]]]) -> bool:
    remaining = iter(made)
    return all(any(name in call.names and _contains(arguments, call.arguments) for name, arguments in remaining)
               for call in expected)


def _contains(given: dict[str, Any], expected: dict[str, Any]) -> bool:
    return all(key in given and _same(given[key], value) for key, value in expected.items())


def _same(given: Any, expected: Any) -> bool:
    if isinstance(expected, bool) or isinstance(given, bool):
        return given == expected
    if isinstance(expected, int | float) and isinstance(given, int | float):
        return float(given) == float(expected)
    if isinstance(expected, str) and isinstance(given, str):
        return given.strip().lower() == expected.strip().lower()
    return given == expected
