"""The output items of a response, as the Responses API spells them, and the stream events that open, fill and
close each: a `message` (its `output_text`), a `reasoning` item (the model's thinking, and the tool trace in the
default trace mode: as `reasoning_text`, or as its `summary_text` when the request asked for a reasoning summary),
a `function_call` (a client's tool handed back) and an `mcp_call` (an MCP call the gateway ran). Each function
returns events without their `sequence_number`, which the writer (responses_answer.py) numbers in the order it
sends them.
"""

import os
from dataclasses import dataclass, field
from typing import Literal

from app.chat import ToolOutput
from app.doors.responses.wire import (
    ArgumentsDoneEvent,
    DeltaEvent,
    Event,
    FunctionCallItem,
    McpCallItem,
    MessageItem,
    PartEvent,
    ReasoningItem,
    TextDoneEvent,
    TextPart,
)
from app.openai.accumulate import ToolCall

TextKind = Literal["message", "reasoning"]
# The label of every MCP call's server: the client sees the gateway's tools, each under the name the model used.
SERVER_LABEL = "toolbridge"
# `reasoning.summary` values that ask for a summary ("auto" is Codex's): the trace is then the summary, which
# clients show by default, where they fold raw reasoning away (Codex shows it only with show_raw_agent_reasoning).
SUMMARIES = frozenset({"auto", "concise", "detailed"})


def item_id(prefix: str) -> str:
    return f"{prefix}_{os.urandom(16).hex()}"


@dataclass(frozen=True)
class Spelling:
    """How an item's text is spelled: its part's type, the field of the item that holds the part, and the names
    of the events that add the part, stream its text and close both, with the index they carry."""

    part: Literal["output_text", "reasoning_text", "summary_text"]
    field: str
    part_events: str
    text_events: str
    index: Literal["content_index", "summary_index"]


_MESSAGE = Spelling("output_text", "content", "response.content_part", "response.output_text", "content_index")
_RAW = Spelling("reasoning_text", "content", "response.content_part", "response.reasoning_text", "content_index")
_SUMMARY = Spelling("summary_text", "summary", "response.reasoning_summary_part", "response.reasoning_summary_text",
                    "summary_index")


@dataclass
class TextItem:
    """A message or reasoning item being written: where it is in the output, and its text so far. `summary`: a
    reasoning item's text is its summary rather than its content."""

    kind: TextKind
    index: int
    summary: bool = False
    id: str = ""
    texts: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.id = self.id or item_id("msg" if self.kind == "message" else "rs")

    @property
    def text(self) -> str:
        return "".join(self.texts)

    @property
    def _spelling(self) -> Spelling:
        return _MESSAGE if self.kind == "message" else _SUMMARY if self.summary else _RAW

    def _part(self, text: str) -> TextPart:
        if self._spelling.part == "output_text":  # a message's
            return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
        return {"type": self._spelling.part, "text": text}

    def item(self, status: str) -> MessageItem | ReasoningItem:
        """The item as the response's output holds it; `in_progress` while it is written, without its text."""
        parts = [] if status == "in_progress" else [self._part(self.text)]
        if self.kind == "message":
            return {"id": self.id, "type": "message", "role": "assistant", "status": status, "content": parts}
        if self.summary:
            return {"id": self.id, "type": "reasoning", "summary": parts, "status": status}
        return {"id": self.id, "type": "reasoning", "summary": [], "content": parts, "status": status}

    def opened(self) -> list[Event]:
        return [{"type": "response.output_item.added", "output_index": self.index, "item": self.item("in_progress")},
                self._part_event("added", self._part(""))]

    def delta(self, text: str) -> Event:
        self.texts.append(text)
        kind = f"{self._spelling.text_events}.delta"
        event: DeltaEvent
        if self.kind == "message":
            event = {"type": kind, "item_id": self.id, "output_index": self.index, "content_index": 0, "delta": text,
                     "logprobs": []}
        elif self.summary:
            event = {"type": kind, "item_id": self.id, "output_index": self.index, "summary_index": 0, "delta": text}
        else:
            event = {"type": kind, "item_id": self.id, "output_index": self.index, "content_index": 0, "delta": text}
        return event

    def closed(self, status: str) -> tuple[MessageItem | ReasoningItem, list[Event]]:
        """The finished item, and the events that close it."""
        text = self.text
        item = self.item(status)
        kind = f"{self._spelling.text_events}.done"
        done: TextDoneEvent
        if self.kind == "message":
            done = {"type": kind, "item_id": self.id, "output_index": self.index, "content_index": 0, "text": text,
                    "logprobs": []}
        elif self.summary:
            done = {"type": kind, "item_id": self.id, "output_index": self.index, "summary_index": 0, "text": text}
        else:
            done = {"type": kind, "item_id": self.id, "output_index": self.index, "content_index": 0, "text": text}
        return item, [done, self._part_event("done", self._part(text)),
                      {"type": "response.output_item.done", "output_index": self.index, "item": item}]

    def _part_event(self, verb: str, part: TextPart) -> PartEvent:
        kind = f"{self._spelling.part_events}.{verb}"
        if self.summary and self.kind == "reasoning":
            return {"type": kind, "item_id": self.id, "output_index": self.index, "summary_index": 0, "part": part}
        return {"type": kind, "item_id": self.id, "output_index": self.index, "content_index": 0, "part": part}


def function_call(call: ToolCall, index: int, namespace: str | None = None,
                  name: str | None = None) -> tuple[FunctionCallItem, list[Event]]:
    """A client's tool call handed back: its item (`call_id` is the id its output must name; a namespaced
    function's `namespace` and own `name`), and its events."""
    item: FunctionCallItem = {"id": item_id("fc"), "type": "function_call", "call_id": call.id,
                              "name": name or call.name, "arguments": call.arguments, "status": "completed"}
    if namespace is not None:
        item["namespace"] = namespace
    delta: DeltaEvent = {"type": "response.function_call_arguments.delta", "item_id": item["id"],
                         "output_index": index, "delta": call.arguments}
    done: ArgumentsDoneEvent = {"type": "response.function_call_arguments.done", "item_id": item["id"],
                                "output_index": index, "arguments": call.arguments, "name": item["name"]}
    return item, [
        {"type": "response.output_item.added", "output_index": index,
         "item": {**item, "arguments": "", "status": "in_progress"}},
        delta,
        done,
        {"type": "response.output_item.done", "output_index": index, "item": item},
    ]


def mcp_call(call: ToolCall, output: ToolOutput, index: int) -> tuple[McpCallItem, list[Event]]:
    """An MCP call the gateway ran: its item (the result as the model read it; a failure's words in `error`),
    and its events, sent together once the call is done."""
    item: McpCallItem = {"id": item_id("mcp"), "type": "mcp_call", "server_label": SERVER_LABEL,
                         "name": call.name, "arguments": call.arguments, "output": output.content,
                         "error": None, "status": "completed"}
    if output.is_error:
        text = output.error_message or output.content
        item |= {"status": "failed",
                 "error": {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": text}]}}
    ended = "response.mcp_call.failed" if output.is_error else "response.mcp_call.completed"
    done: ArgumentsDoneEvent = {"type": "response.mcp_call_arguments.done", "item_id": item["id"],
                                "output_index": index, "arguments": call.arguments}
    return item, [
        {"type": "response.output_item.added", "output_index": index,
         "item": {**item, "output": None, "error": None, "status": "in_progress"}},
        done,
        {"type": ended, "item_id": item["id"], "output_index": index},
        {"type": "response.output_item.done", "output_index": index, "item": item},
    ]
