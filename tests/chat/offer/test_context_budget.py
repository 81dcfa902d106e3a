"""Restored results fitted into the model's context (app/chat/context_budget.py), and the cut they get
(app/openai/result_format.py): tables of sizes, no gateway."""

import json
from typing import Any

import pytest

from app.chat.offer.context_budget import SHORTENED_CHARS, fit_restored, prompt_allowance
from app.openai.result_format import omitted_result, shortened_result

OMITTED = omitted_result("envelope")


def envelope(letter: str, size: int) -> str:
    return json.dumps({"status": "success", "data": letter * size}, separators=(",", ":"))


def history(*sizes: int) -> tuple[list[dict], list[int]]:
    """A user's long question, then one restored result per size; returns the messages and where the results are."""
    messages: list[dict] = [{"role": "user", "content": "q" * 5000}]
    for number, size in enumerate(sizes):
        messages += [{"role": "assistant", "content": "", "tool_calls": [{"id": f"c{number}"}]},
                     {"role": "tool", "tool_call_id": f"c{number}", "content": envelope("ab"[number % 2], size)}]
    return messages, [index for index, m in enumerate(messages) if m["role"] == "tool"]


def size(messages: list[dict]) -> int:
    return len(json.dumps(messages, ensure_ascii=False, separators=(",", ":")))


def cut(text: str, limit: int) -> str:
    return shortened_result(text, limit, "envelope")


@pytest.mark.parametrize(("short_by", "expected"), [
    (0, ["whole", "whole"]),
    (3000, ["cut", "whole"]),  # the oldest gives what is needed
    (9000, ["cut", "cut"]),  # the oldest down to the floor, then the next
    (12_500, ["omitted", "omitted"]),  # both at the floor and still too long: left out, oldest first
])
def test_the_oldest_restored_results_are_cut_first_then_left_out(short_by: int, expected: list[str]) -> None:
    messages, restored = history(6000, 6000)
    fitted = fit_restored(messages, restored, size(messages) - short_by, cut, OMITTED)
    kinds = []
    for index in restored:
        content = fitted.messages[index]["content"]
        kinds.append("omitted" if content == OMITTED else "whole" if content == messages[index]["content"] else "cut")
        if kinds[-1] == "cut":
            assert json.loads(content)["meta"]["truncated"]["total_chars"] == 6000
            assert len(content) >= SHORTENED_CHARS - 10
    assert kinds == expected
    assert fitted.messages[0] == messages[0]  # the user's words, whatever happens
    if short_by < 12_500:
        assert size(fitted.messages) <= size(messages) - short_by


def test_nothing_restored_nothing_touched() -> None:
    messages, _ = history(6000)
    assert fit_restored(messages, [], 10, cut, OMITTED).messages is messages


@pytest.mark.parametrize(("body", "context", "tools_chars", "expected"), [
    ({}, 8192, 0, (8192 - 2048) * 3),  # a quarter of the context, at most 2048 tokens, for the answer
    ({}, 4096, 0, (4096 - 1024) * 3),
    ({"max_tokens": 100}, 8192, 0, (8192 - 100) * 3),
    ({"max_completion_tokens": 300}, 8192, 0, (8192 - 300) * 3),
])
def test_the_allowance_leaves_room_for_the_answer_and_the_tools(
    body: dict, context: int, tools_chars: int, expected: int
) -> None:
    assert prompt_allowance(context, body, []) == expected
    tools = [{"type": "function", "function": {"name": "t"}}]
    assert prompt_allowance(context, body, tools) == expected - len(json.dumps(tools, separators=(",", ":")))


@pytest.mark.parametrize(("content", "result_format", "check"), [
    (json.dumps({"status": "success", "data": list(range(500))}), "envelope",
     lambda out: json.loads(out)["meta"]["truncated"]["total_items"] == 500),
    (json.dumps({"status": "success", "data": {"rows": ["x" * 50] * 40, "n": 40}}), "envelope",
     lambda out: json.loads(out)["meta"]["truncated"]["list"] == "rows" and json.loads(out)["data"]["n"] == 40),
    ("plain text " * 200, "text", lambda out: "[cut: 2200 characters in all." in out),
    ("not json at all " * 100, "envelope", lambda out: "[cut:" in out),
])
def test_a_shortened_result_is_cut_the_way_a_long_result_is(content: str, result_format: str, check: Any) -> None:
    out = shortened_result(content, 1000, result_format)  # type: ignore[arg-type]
    assert len(out) <= 1000 and check(out)
    assert shortened_result(content, len(content), result_format) == content  # short enough: as it was
