"""The answer's parts spelled as one Anthropic message: its stream's events, block after block, and the message
they make, kept as they go so that a whole answer is exactly what its stream would have said.

Blocks never interleave: a block closes before the next opens, and reasoning that comes again after text (a
later round's trace) opens a new thinking block. The client's own tool calls come last, as tool_use blocks.
"""

import json
import os
from typing import Literal

from app.chat import AnswerPart, Delta, Ended
from app.doors.messages.wire import BlockStart, ContentBlock, Event, Message, TextBlock, ThinkingBlock, ToolUseBlock
from app.openai.accumulate import ToolCall
from app.openai.wire import JSONObject, JSONValue

# The chat API's finish reasons in Anthropic's words. A stop sequence ends an answer as "stop" there, without
# saying which one, so it reads as end_turn here.
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "content_filter": "refusal"}
TextKind = Literal["text", "thinking"]


class MessageBlocks:
    """One message's events and content. `spell` each part in turn: it returns the events that say it, and
    `message` is the message so far (whole once an Ended was spelled)."""

    def __init__(self, model: str | None) -> None:
        self.message: Message = {
            "id": f"msg_{os.urandom(12).hex()}", "type": "message", "role": "assistant", "model": model or "unknown",
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        self._open: TextBlock | ThinkingBlock | None = None  # the block open now, the message's last, if one is
        self.ended = False

    def started(self) -> Event:
        """The stream's first event: the message with no content yet."""
        return {"type": "message_start", "message": {**self.message, "content": [], "usage": {**self.message["usage"]}}}

    def spell(self, part: AnswerPart) -> list[Event]:
        if isinstance(part, Delta):
            # Reasoning before text: a chunk that has both thought first.
            return self._write("thinking", part.reasoning) + self._write("text", part.content)
        if isinstance(part, Ended):
            return self._end(part)
        return []  # the MCP calls that finished: their trace came as reasoning already

    def _write(self, kind: TextKind, text: str) -> list[Event]:
        if not text:
            return []
        events: list[Event] = []
        if self._open is None or self._open["type"] != kind:
            events += self._close()
            self._open = _empty(kind)
            events.append(self._start(self._open))
        index = len(self.message["content"]) - 1
        if self._open["type"] == "text":
            self._open["text"] += text
            events.append({"type": "content_block_delta", "index": index,
                           "delta": {"type": "text_delta", "text": text}})
        else:
            self._open["thinking"] += text
            events.append({"type": "content_block_delta", "index": index,
                           "delta": {"type": "thinking_delta", "thinking": text}})
        return events

    def _start(self, block: ContentBlock) -> BlockStart:
        self.message["content"].append(block)
        return {"type": "content_block_start", "index": len(self.message["content"]) - 1, "content_block": block.copy()}

    def _close(self) -> list[Event]:
        if self._open is None:
            return []
        self._open = None
        return [{"type": "content_block_stop", "index": len(self.message["content"]) - 1}]

    def _end(self, ended: Ended) -> list[Event]:
        events = self._close()
        for call in ended.client_tool_calls:
            events += self._tool_use(call)
        stop_reason = STOP_REASONS.get(ended.finish_reason, "end_turn")
        input_tokens = ended.usage.prompt_tokens if ended.usage else 0
        output_tokens = ended.usage.completion_tokens if ended.usage else 0
        self.message |= {"stop_reason": stop_reason, "usage": {"input_tokens": input_tokens,
                                                              "output_tokens": output_tokens}}
        self.ended = True
        return [*events, {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                          "usage": {**self.message["usage"]}},
                {"type": "message_stop"}]

    def _tool_use(self, call: ToolCall) -> list[Event]:
        """A client's tool call handed back: its input streamed whole, as one piece of JSON."""
        tool_input = tool_input_of(call.arguments)
        block: ToolUseBlock = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        start = self._start(block)
        block["input"] = tool_input
        index = start["index"]
        return [start, {"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": json.dumps(tool_input)}},
                {"type": "content_block_stop", "index": index}]


def _empty(kind: TextKind) -> TextBlock | ThinkingBlock:
    if kind == "text":
        return {"type": "text", "text": ""}
    return {"type": "thinking", "thinking": "", "signature": ""}


def tool_input_of(arguments: str) -> JSONObject:
    """A call's arguments as the tool_use block's `input`, which is an object: {} for arguments the model left
    empty or wrote as something else (the client's tool then says what it misses)."""
    try:
        parsed: JSONValue = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}
