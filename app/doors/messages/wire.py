"""What the Messages door writes, in Anthropic's wire format, as types: a message and its content blocks, and the
server-sent events that stream it. What its clients send is read as JSON and narrowed where it is read
(content.py, request.py)."""

from typing import Literal, TypedDict

from app.openai.wire import JSONObject


class TextBlock(TypedDict):
    type: Literal["text"]
    text: str


class ThinkingBlock(TypedDict):
    type: Literal["thinking"]
    thinking: str
    signature: str


class ToolUseBlock(TypedDict):
    """A client's tool call handed back: its `input` is an object."""

    type: Literal["tool_use"]
    id: str
    name: str
    input: JSONObject


ContentBlock = TextBlock | ThinkingBlock | ToolUseBlock


class Usage(TypedDict):
    input_tokens: int
    output_tokens: int


class Message(TypedDict):
    """One assistant message, as the API answers it whole and as its stream's events build it."""

    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    model: str
    content: list[ContentBlock]
    stop_reason: str | None
    stop_sequence: str | None
    usage: Usage


class MessageStart(TypedDict):
    type: Literal["message_start"]
    message: Message


class BlockStart(TypedDict):
    type: Literal["content_block_start"]
    index: int
    content_block: ContentBlock


class TextDelta(TypedDict):
    type: Literal["text_delta"]
    text: str


class ThinkingDelta(TypedDict):
    type: Literal["thinking_delta"]
    thinking: str


class InputJSONDelta(TypedDict):
    type: Literal["input_json_delta"]
    partial_json: str


class BlockDelta(TypedDict):
    type: Literal["content_block_delta"]
    index: int
    delta: TextDelta | ThinkingDelta | InputJSONDelta


class BlockStop(TypedDict):
    type: Literal["content_block_stop"]
    index: int


class StopDelta(TypedDict):
    stop_reason: str
    stop_sequence: str | None


class MessageDelta(TypedDict):
    type: Literal["message_delta"]
    delta: StopDelta
    usage: Usage


class MessageStop(TypedDict):
    type: Literal["message_stop"]


class ErrorDetail(TypedDict):
    type: str  # Anthropic's error type: its clients raise their typed errors by it
    message: str


class ErrorEvent(TypedDict):
    """A failure, as the API answers it and as its stream ends with it."""

    type: Literal["error"]
    error: ErrorDetail


Event = MessageStart | BlockStart | BlockDelta | BlockStop | MessageDelta | MessageStop | ErrorEvent
