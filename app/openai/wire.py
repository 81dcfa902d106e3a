"""The Chat Completions wire format as types: JSON itself, and the shapes the gateway reads and writes (messages
and their parts, tool calls, tools, chunks, completions).

The shapes are TypedDicts, as the openai SDK types its own request params: a body parsed from JSON (and checked by
`schemas.py`) is used as it is, so nothing is copied on the request's path and every field the gateway does not
know (a client's `temperature`, a server's `reasoning_content`) goes on untouched. Fields marked `NotRequired` are
absent as often as present. What comes from outside unchecked (an upstream's chunk, an MCP server's JSON) is
`JSONValue` until it is read: the reader narrows it.
"""

from typing import Literal, NotRequired, Required, TypeAlias, TypedDict

# JSON as Python holds it after json.loads: the type of a value whose shape nothing has checked yet.
JSONValue: TypeAlias = "dict[str, JSONValue] | list[JSONValue] | str | int | float | bool | None"
JSONObject: TypeAlias = dict[str, JSONValue]


class ImageURL(TypedDict, total=False):
    url: Required[str]  # an https:// address or a data: URL
    detail: str


class ContentPart(TypedDict, total=False):
    """One part of a message's content. `type` says which: "text" (with `text`), "image_url" (with `image_url`), or
    another a client sent (`input_audio`, `file`), carried on untouched."""

    type: Required[str]
    text: str
    image_url: ImageURL


Content: TypeAlias = str | list[ContentPart] | None


class FunctionCall(TypedDict):
    name: str
    arguments: str  # JSON text, as the model wrote it


class ToolCallPart(TypedDict):
    """A call in an assistant message's `tool_calls`."""

    id: str
    type: Literal["function"]
    function: FunctionCall


class Message(TypedDict, total=False):
    """A chat message of any role: "system" (or "developer"), "user", "assistant" (with `tool_calls`), "tool" (with
    `tool_call_id`)."""

    role: Required[str]
    content: Content
    name: str
    tool_calls: list[ToolCallPart]
    tool_call_id: str
    reasoning_content: str  # an assistant's thinking, as llama.cpp and LM Studio name it


class FunctionDefinition(TypedDict, total=False):
    name: Required[str]
    description: str
    parameters: JSONObject  # a JSON Schema
    strict: bool


class Tool(TypedDict, total=False):
    """A tool as a request offers it: a function (with `function`), or another type a client sent, carried on."""

    type: Required[str]
    function: FunctionDefinition


class StreamOptions(TypedDict, total=False):
    include_usage: bool


class ChatBody(TypedDict, total=False):
    """A `/v1/chat/completions` request body: the fields the gateway reads; the others go to the upstream as sent."""

    model: str
    messages: Required[list[Message]]
    tools: list[Tool]
    tool_choice: JSONValue
    stream: bool
    stream_options: StreamOptions
    parallel_tool_calls: bool
    max_tokens: int
    max_completion_tokens: int
    temperature: float
    stop: str | list[str]
    metadata: JSONValue  # OpenAI's: strings by name; `toolbridge_tools` chooses tools (app/chat/offer/toolsets.py)


class UsageCounts(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ToolCallDelta(TypedDict, total=False):
    index: Required[int]
    id: str
    type: Literal["function"]
    function: FunctionCall


class Delta(TypedDict, total=False):
    role: str
    content: str | None
    reasoning_content: str
    tool_calls: list[ToolCallDelta]


class ChunkChoice(TypedDict):
    index: int
    delta: Delta
    logprobs: None
    finish_reason: str | None


class Chunk(TypedDict):
    """A `chat.completion.chunk`, as the gateway writes one (`usage` on the last, when the client asked)."""

    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: NotRequired[UsageCounts | None]


class CompletionChoice(TypedDict):
    index: int
    message: Message
    logprobs: None
    finish_reason: str | None


class Completion(TypedDict):
    """A whole `chat.completion`, as the gateway writes one."""

    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: NotRequired[UsageCounts]


def tool_name(tool: Tool) -> str:
    """A tool's function name; "" for a tool of another type."""
    function = tool.get("function")
    return function.get("name", "") if function is not None else ""
