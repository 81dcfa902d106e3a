"""Markup that models print into `content`: thinking, and tool calls the server failed to parse.

Content streams through `ContentSplitter` piece by piece. `<think>…</think>` goes to the reasoning
channel. `<tool_call>{…}</tool_call>` (Qwen/Hermes templates) and LM Studio's
`[TOOL_REQUEST]{…}[END_TOOL_REQUEST]` are captured as calls and never shown. A message that is only
`{"name": …, "arguments": …}` naming an offered tool is a call too; such a message is held back until
the turn ends, because until then it could still be ordinary JSON. Tags split across chunks are handled
by holding back any tail that could start a tag.
"""

import json
from collections.abc import Collection
from dataclasses import dataclass, field

from app.openai.wire import JSONValue

_BLOCKS = {"<think>": ("</think>", "reasoning"), "<tool_call>": ("</tool_call>", "call"),
           "[TOOL_REQUEST]": ("[END_TOOL_REQUEST]", "call")}


@dataclass(frozen=True)
class TextCall:
    name: str
    arguments: str


@dataclass
class TextDelta:
    """Text a client may see at once: what a chunk (or a stretch of content) adds to the answer and to the
    reasoning."""

    content: str = ""
    reasoning: str = ""


@dataclass
class ContentSplitter:
    tool_names: Collection[str] = ()
    calls: list[TextCall] = field(default_factory=list)
    _pending: str = ""
    _closing: str | None = None
    _kind: str = ""
    _captured: str = ""
    _started: bool = False
    _holding_json: bool = False

    def feed(self, text: str) -> TextDelta:
        out = TextDelta()
        if self._holding_json or (not self._started and self._starts_json(text)):
            self._holding_json = True
            self._pending += text
            return out
        self._started = self._started or bool(text.strip())
        data = self._pending + text
        self._pending = ""
        if self._closing is None and "<" not in data and "[" not in data:  # no tag, nor the start of one
            out.content = data
            return out
        while data:
            if self._closing is not None:
                end = data.find(self._closing)
                if end < 0:
                    keep = _partial_suffix(data, self._closing)
                    self._take(data[: len(data) - keep], out)
                    self._pending = data[len(data) - keep :]
                    return out
                self._take(data[:end], out)
                after = end + len(self._closing)
                self._close_block()
                data = data[after:]
                continue
            opening, start = _first_opening(data)
            if opening is None:
                keep = max(_partial_suffix(data, tag) for tag in _BLOCKS)
                out.content += data[: len(data) - keep]
                self._pending = data[len(data) - keep :]
                return out
            out.content += data[:start]
            self._closing, self._kind = _BLOCKS[opening]
            data = data[start + len(opening) :]
        return out

    def finish(self) -> TextDelta:
        """The end of the turn: what was held back is either a call or plain text after all."""
        out = TextDelta()
        if self._holding_json:
            call = self._bare_call(self._pending)
            if call is None:
                out.content = self._pending
            else:
                self.calls.append(call)
        elif self._closing is not None:
            self._take(self._pending, out)
            if self._kind == "call":
                self._close_block()
        else:
            out.content = self._pending
        self._pending = ""
        return out

    def _starts_json(self, text: str) -> bool:
        stripped = text.lstrip()
        return bool(self.tool_names) and stripped.startswith("{")

    def _take(self, text: str, out: TextDelta) -> None:
        if self._kind == "reasoning":
            out.reasoning += text
        else:
            self._captured += text

    def _close_block(self) -> None:
        if self._kind == "call":
            call = _parse_call(self._captured)
            if call is not None:
                self.calls.append(call)
        self._closing, self._kind, self._captured = None, "", ""

    def _bare_call(self, text: str) -> TextCall | None:
        call = _parse_call(text)
        return call if call is not None and call.name in self.tool_names else None


def _parse_call(text: str) -> TextCall | None:
    try:
        payload: JSONValue = json.loads(text.strip())
    except ValueError:
        return None
    if isinstance(payload, list) and len(payload) == 1:
        payload = payload[0]
    name = payload.get("name") if isinstance(payload, dict) else None
    if not isinstance(payload, dict) or not isinstance(name, str):
        return None
    arguments = payload.get("arguments", payload.get("parameters", {}))
    return TextCall(name, arguments if isinstance(arguments, str) else json.dumps(arguments))


def _first_opening(data: str) -> tuple[str | None, int]:
    found = [(data.find(tag), tag) for tag in _BLOCKS if tag in data]
    if not found:
        return None, -1
    start, tag = min(found)
    return tag, start


def _partial_suffix(data: str, tag: str) -> int:
    """Length of the longest end of `data` that is the start of `tag` (a tag cut by a chunk boundary)."""
    for size in range(min(len(tag) - 1, len(data)), 0, -1):
        if tag.startswith(data[-size:]):
            return size
    return 0
