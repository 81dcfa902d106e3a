"""What one request may carry, by table: the JSON values counted on a body's bytes (strings told apart exactly,
escapes and slice ends included), and the messages, content parts and tools of a chat body, each refused one past
its bound with a 400 naming it. Over HTTP, on every door: tests/security/test_huge_bodies.py."""

import json
import random
from typing import Any

import pytest

from app.api import chat_body
from app.api.chat_body import (
    MAX_MESSAGES,
    MAX_PARTS,
    MAX_TOOLS,
    MAX_VALUES,
    check_carried,
    parse_chat_body,
    values_past,
)
from app.openai.errors import InvalidRequest


def counted(value: Any) -> int:
    """What values_past counts, from the parsed value: the body, every array item and field value, and each empty
    array or object once more (its opening bracket)."""
    count, pending = 1, [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict | list):
            count += len(item) if item else 1
            pending.extend(item.values() if isinstance(item, dict) else item)
    return count


@pytest.mark.parametrize(("body", "count"), [
    (b"0", 1),
    (b"[]", 2),
    (b"[1, 2, 3]", 4),
    (b'{"a": [1, {"b": 2}], "c": {}}', 7),
    (b'["a,b,c", "[{", "}]"]', 4),  # commas and brackets in strings are not values
    (b'["\\"", ",", "\\\\", ","]', 5),  # an escaped quote does not end its string; an escaped backslash does not escape
    (b'["\\\\\\",[{", 1]', 3),  # \\ then \" : the string goes on past the second quote
])
def test_values_are_counted_outside_strings(body: bytes, count: int) -> None:
    assert values_past(body, count - 1) == count
    assert values_past(body, count) is None


@pytest.mark.parametrize("slice_bytes", [1, 2, 3, 7, 64])
def test_the_count_is_the_same_in_slices_of_any_size(monkeypatch: pytest.MonkeyPatch, slice_bytes: int) -> None:
    """Slices end anywhere but inside an escape: past a run of backslashes and the character after it."""
    monkeypatch.setattr(chat_body, "_SLICE", slice_bytes)
    words = ["a,b", "[x]", '"', "\\", '\\"', "{,}", "é", ""]
    generator = random.Random(43)

    def value(depth: int) -> Any:
        kind = generator.random()
        if depth > 3 or kind < 0.3:
            return generator.choice([0, 1.5, True, None, *words])
        if kind < 0.65:
            return [value(depth + 1) for _ in range(generator.randint(0, 4))]
        return {generator.choice(words): value(depth + 1) for _ in range(generator.randint(0, 4))}

    for _ in range(300):
        parsed = value(0)
        body = json.dumps(parsed, ensure_ascii=generator.random() < 0.5).encode()
        count = counted(parsed)
        assert values_past(body, count - 1) is not None, body
        assert values_past(body, count) is None, body


def test_a_long_text_full_of_commas_is_not_refused() -> None:
    """A pasted table or code: millions of commas and brackets, all inside one string."""
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "a,[b],{c}," * 400_000}]}).encode()
    sent, _ = parse_chat_body(body, "application/json")
    assert len(sent["messages"][0]["content"]) == 4_000_000


def test_a_body_of_more_values_is_refused_before_it_is_parsed() -> None:
    body = b"[" + b"0," * MAX_VALUES + b"0]"
    with pytest.raises(InvalidRequest) as refused:
        parse_chat_body(body, "application/json")
    assert refused.value.code == "too_many_values" and refused.value.status_code == 400
    assert f"{MAX_VALUES:,} JSON values" in refused.value.message


def _chat(messages: int = 1, parts: int = 0, tools: int = 0) -> dict[str, Any]:
    content: Any = [{"type": "text", "text": "a"}] * parts if parts else "hi"
    return {"messages": [{"role": "user", "content": content}] * messages,
            "tools": [{"type": "function", "function": {"name": f"f{n}"}} for n in range(tools)]}


@pytest.mark.parametrize(("body", "code", "count", "bound", "param"), [
    (_chat(messages=MAX_MESSAGES + 1), "too_many_messages", MAX_MESSAGES + 1, MAX_MESSAGES, "input"),
    (_chat(messages=2, parts=MAX_PARTS // 2 + 1), "too_many_parts", MAX_PARTS + 2, MAX_PARTS, "input"),
    (_chat(tools=MAX_TOOLS + 1), "too_many_tools", MAX_TOOLS + 1, MAX_TOOLS, "tools"),
], ids=["messages", "parts", "tools"])
def test_one_past_a_bound_is_refused_naming_it(body: dict[str, Any], code: str, count: int, bound: int,
                                                param: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        check_carried(body, "input")
    assert (refused.value.code, refused.value.param) == (code, param)
    assert f"{count:,}" in refused.value.message and f"at most {bound:,}" in refused.value.message


def test_a_body_at_every_bound_is_taken() -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "a"}] * 2}] * (MAX_PARTS // 2)
    body = {**_chat(tools=MAX_TOOLS), "messages": messages + [{"role": "user", "content": "hi"}] * (
        MAX_MESSAGES - len(messages))}
    check_carried(body, "messages")
    check_carried({"messages": "not a list", "tools": {"not": "a list"}}, "messages")  # the wire model refuses these
