"""Fitting restored tool results into the model's context: the oldest are shortened first, then left out.

Token counts differ per model and no tokenizer is at hand, so sizes are characters, counted at
CHARS_PER_TOKEN: few enough for JSON, which tokenizes densely, that an estimate errs towards fitting.
Only results given back from earlier turns are touched, never what the user or the client wrote.
"""

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import orjson

from app.openai.wire import ChatBody, Message, Tool

CHARS_PER_TOKEN = 3
ANSWER_RESERVE_TOKENS = 2048  # at most; a quarter of a smaller context
SHORTENED_CHARS = 1000  # what a shortened result keeps at least, before results are left out instead


@dataclass(frozen=True)
class Fitted:
    messages: Sequence[Message]
    shortened: int
    dropped: int


def prompt_allowance(context_tokens: int, body: ChatBody, tools: Sequence[Tool]) -> int:
    """The characters the messages may take: the context, less room for the answer and the tool list."""
    asked = body.get("max_completion_tokens") or body.get("max_tokens")
    reserve = asked if isinstance(asked, int) and asked > 0 else min(ANSWER_RESERVE_TOKENS, context_tokens // 4)
    return (context_tokens - reserve) * CHARS_PER_TOKEN - (wire_chars(list(tools)) if tools else 0)


def fit_restored(
    messages: Sequence[Message], restored: Sequence[int], allowance: int,
    shorten: Callable[[str, int], str], omitted: str,
) -> Fitted:
    """The messages within `allowance` characters if shortening or leaving out the restored tool results
    (at `restored`, oldest first) can make them so; else as small as that makes them."""
    excess = wire_chars(messages) - allowance
    if excess <= 0 or not restored:
        return Fitted(messages, 0, 0)
    fitted = list(messages)
    shortened = dropped = 0
    for index in restored:
        original = fitted[index].get("content")
        if not isinstance(original, str):
            continue
        current = original
        # Sizes are counted as they go over the wire (JSON-escaped), so a cut may save less than asked: cut again.
        while excess > 0 and (target := max(SHORTENED_CHARS, len(current) - excess)) < len(current):
            cut = shorten(original, target)
            saved = wire_chars(current) - wire_chars(cut)
            if saved <= 0:
                break
            current, excess = cut, excess - saved
        if current is not original:
            fitted[index] = {**fitted[index], "content": current}
            shortened += 1
        if excess <= 0:
            return Fitted(fitted, shortened, dropped)
    for index in restored:
        content = fitted[index].get("content")
        if not isinstance(content, str) or wire_chars(content) <= wire_chars(omitted):
            continue
        fitted[index] = {**fitted[index], "content": omitted}
        excess -= wire_chars(content) - wire_chars(omitted)
        dropped += 1
        if content is not messages[index].get("content"):
            shortened -= 1  # it was cut first; it counts once, as left out
        if excess <= 0:
            break
    return Fitted(fitted, shortened, dropped)


def wire_chars(value: object) -> int:
    """How many characters a value takes as JSON on the wire: what sizes against a context are counted in."""
    try:
        return len(orjson.dumps(value).decode())  # the tool budget weighs every tool of a request
    except orjson.JSONEncodeError:  # what only the standard library writes (integers past 64 bits)
        return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
