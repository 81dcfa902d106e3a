"""Folds one upstream turn's stream of chunk dicts into a message, tolerating each server's quirks.

Thinking and tool calls printed into the content are split out by `markup.ContentSplitter`.

Tool-call deltas are merged by `index`. A name is taken from its first non-empty value (LM Studio
repeats `name: ""` on continuation chunks), ids likewise, and a call that never got an id is given one.
"""

import json
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Collection
from dataclasses import dataclass, field

from app.openai.markup import ContentSplitter, TextDelta
from app.openai.wire import JSONObject, JSONValue, ToolCallPart, UsageCounts


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str

    def to_message_part(self) -> ToolCallPart:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class _DraftCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def add(self, other: "Usage") -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.total_tokens += other.total_tokens

    def as_dict(self) -> UsageCounts:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }


class TurnAccumulator:
    """State of one upstream turn. Feed chunks with `add`; read the folded turn afterwards."""

    def __init__(self, tool_names: Collection[str] = ()) -> None:
        self._splitter = ContentSplitter(tool_names)
        self.content_parts: list[str] = []
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.model: str | None = None
        self._calls: dict[int, _DraftCall] = {}
        self._text_call_ids: list[str] = []

    def add(self, chunk: JSONObject) -> TextDelta:
        """Folds in one chunk, as the upstream sent it (nothing has checked its shape: what is not where it should
        be counts as absent)."""
        model, usage, choices = chunk.get("model"), chunk.get("usage"), chunk.get("choices")
        if model and isinstance(model, str) and self.model is None:
            self.model = model
        if isinstance(usage, dict):
            self.usage = _read_usage(usage)
        choice = choices[0] if isinstance(choices, list) and choices else None
        if not isinstance(choice, dict):
            return TextDelta()
        finish_reason = choice.get("finish_reason")
        if finish_reason and isinstance(finish_reason, str):
            self.finish_reason = finish_reason
        delta = choice.get("delta") or choice.get("message") or {}
        if not isinstance(delta, dict):
            return TextDelta()
        calls = delta.get("tool_calls")
        for part in calls if isinstance(calls, list) else ():
            if isinstance(part, dict):
                self._add_call_part(part)
        content = delta.get("content")
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        split = self._splitter.feed(content) if isinstance(content, str) and content else TextDelta()
        return self._keep(TextDelta(content=split.content, reasoning=_text(reasoning) + split.reasoning))

    def finish(self) -> TextDelta:
        """Ends the turn: text held back in case it was markup is released, or becomes a call."""
        split = self._splitter.finish()
        return self._keep(TextDelta(content=split.content, reasoning=split.reasoning))

    async def fold(self, batches: AsyncIterator[list[JSONObject]]) -> AsyncGenerator[TextDelta, None]:
        """Folds in a turn's chunks as they arrive, in batches (those that arrived together), passing on the text of
        each batch as one delta: what arrived together goes on together (a read of an unpaced stream holds hundreds
        of tokens). Then ends the turn (`finish`), passing on what that releases."""
        async for batch in batches:
            content, reasoning = [], []
            for chunk in batch:
                delta = self.add(chunk)
                content.append(delta.content)
                reasoning.append(delta.reasoning)
            if any(content) or any(reasoning):
                yield TextDelta("".join(content), "".join(reasoning))
        tail = self.finish()
        if tail.content or tail.reasoning:
            yield tail

    def _keep(self, delta: TextDelta) -> TextDelta:
        if delta.content:
            self.content_parts.append(delta.content)
        return delta

    @property
    def content(self) -> str:
        return "".join(self.content_parts)

    def tool_calls(self) -> list[ToolCall]:
        """The turn's calls: the structured ones, else those the model printed as text."""
        calls = []
        for index in sorted(self._calls):
            draft = self._calls[index]
            if not draft.name:
                continue
            draft.id = draft.id or _new_call_id()
            calls.append(ToolCall(id=draft.id, name=draft.name, arguments="".join(draft.arguments)))
        if not calls:
            for number, text_call in enumerate(self._splitter.calls):
                if len(self._text_call_ids) <= number:
                    self._text_call_ids.append(_new_call_id())
                calls.append(ToolCall(self._text_call_ids[number], text_call.name, text_call.arguments))
        return calls

    def _add_call_part(self, part: JSONObject) -> None:
        index, call_id = part.get("index"), part.get("id")
        if not isinstance(index, int):
            index = self._index_without_one(call_id)
        draft = self._calls.setdefault(index, _DraftCall())
        if call_id and not draft.id:
            draft.id = str(call_id)
        function = part.get("function")
        if not isinstance(function, dict):
            return
        name, arguments = function.get("name"), function.get("arguments")
        if name and isinstance(name, str) and not draft.name:
            draft.name = name
        if isinstance(arguments, str):
            draft.arguments.append(arguments)
        elif isinstance(arguments, dict):  # some servers send parsed arguments
            draft.arguments.append(json.dumps(arguments))

    def _index_without_one(self, call_id: JSONValue) -> int:
        # Some servers omit `index`: a new id starts a new call, anything else continues the last one.
        if not self._calls:
            return 0
        last = max(self._calls)
        if call_id and self._calls[last].id and self._calls[last].id != str(call_id):
            return last + 1
        return last


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def _read_usage(raw: JSONObject) -> Usage:
    def number(key: str) -> int:
        value = raw.get(key)
        return value if isinstance(value, int) else 0

    prompt, completion = number("prompt_tokens"), number("completion_tokens")
    return Usage(prompt, completion, number("total_tokens") or prompt + completion)


def _text(value: JSONValue) -> str:
    return value if isinstance(value, str) else ""
