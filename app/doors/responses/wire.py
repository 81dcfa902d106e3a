"""What the Responses door writes, in the Responses API's wire format, as types: a response, its output items and
their parts, and the stream's events. What its clients send is read as JSON and narrowed where it is read
(request.py, input.py); what the response echoes of it is that JSON as sent."""

from typing import Literal, NotRequired, TypedDict

from app.openai.wire import JSONValue, Message


class OutputText(TypedDict):
    type: Literal["output_text"]
    text: str
    annotations: list[JSONValue]
    logprobs: list[JSONValue]


class ReasoningText(TypedDict):
    type: Literal["reasoning_text", "summary_text"]
    text: str


TextPart = OutputText | ReasoningText


class MessageItem(TypedDict):
    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    status: str
    content: list[TextPart]


class ReasoningItem(TypedDict):
    """The model's thinking and the tool trace: its `summary`, or its `content` (raw) beside an empty summary."""

    id: str
    type: Literal["reasoning"]
    summary: list[TextPart]
    content: NotRequired[list[TextPart]]
    status: str


class FunctionCallItem(TypedDict):
    """A client's tool call handed back; a namespaced function's `namespace` and own `name`."""

    id: str
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str
    status: str
    namespace: NotRequired[str]


class ErrorText(TypedDict):
    type: Literal["text"]
    text: str


class McpError(TypedDict):
    type: str
    content: list[ErrorText]


class McpCallItem(TypedDict):
    """An MCP call the gateway ran: the result as the model read it, a failure's words in `error`."""

    id: str
    type: Literal["mcp_call"]
    server_label: str
    name: str
    arguments: str
    output: str | None
    error: McpError | None
    status: str


OutputItem = MessageItem | ReasoningItem | FunctionCallItem | McpCallItem


class EchoedReasoning(TypedDict):
    effort: JSONValue
    summary: JSONValue


class EchoedText(TypedDict):
    format: JSONValue


class Echo(TypedDict, total=False):
    """What a response repeats of its request, as the client sent it (with the API's defaults)."""

    instructions: JSONValue
    max_output_tokens: JSONValue
    metadata: JSONValue
    parallel_tool_calls: bool
    previous_response_id: JSONValue
    reasoning: EchoedReasoning
    store: bool
    temperature: JSONValue
    text: EchoedText
    tool_choice: JSONValue
    tools: JSONValue
    top_p: JSONValue
    truncation: JSONValue
    user: JSONValue


class ResponseError(TypedDict):
    code: str
    message: str


class IncompleteDetails(TypedDict):
    reason: str


class InputTokensDetails(TypedDict):
    cached_tokens: int
    cache_write_tokens: int


class OutputTokensDetails(TypedDict):
    reasoning_tokens: int


class Usage(TypedDict):
    input_tokens: int
    output_tokens: int
    total_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens_details: OutputTokensDetails


class ResponseCore(TypedDict):
    """A response's own fields, before the echo of its request."""

    id: str
    object: Literal["response"]
    created_at: int
    model: str
    status: str
    error: ResponseError | None
    incomplete_details: IncompleteDetails | None
    output: list[OutputItem]
    usage: Usage | None
    completed_at: NotRequired[int]


class Response(ResponseCore, Echo):
    """A response object: its own fields, then the echo."""


class Deleted(TypedDict):
    id: str
    object: Literal["response.deleted"]
    deleted: bool


class ResponseEvent(TypedDict):
    """response.created, .in_progress, .completed, .incomplete, .failed: the response as it is then."""

    type: str
    response: Response
    sequence_number: NotRequired[int]  # numbered by the writer as it sends them, as every event


class ItemEvent(TypedDict):
    """response.output_item.added and .done."""

    type: str
    output_index: int
    item: OutputItem
    sequence_number: NotRequired[int]


class PartEvent(TypedDict):
    """A text part added or done; a reasoning summary's part carries `summary_index`, the others `content_index`."""

    type: str
    item_id: str
    output_index: int
    content_index: NotRequired[int]
    summary_index: NotRequired[int]
    part: TextPart
    sequence_number: NotRequired[int]


class DeltaEvent(TypedDict):
    """A piece of an item's text, or of a function call's arguments (no index of a part then)."""

    type: str
    item_id: str
    output_index: int
    content_index: NotRequired[int]
    summary_index: NotRequired[int]
    delta: str
    logprobs: NotRequired[list[JSONValue]]  # a message's text only
    sequence_number: NotRequired[int]


class TextDoneEvent(TypedDict):
    type: str
    item_id: str
    output_index: int
    content_index: NotRequired[int]
    summary_index: NotRequired[int]
    text: str
    logprobs: NotRequired[list[JSONValue]]
    sequence_number: NotRequired[int]


class ArgumentsDoneEvent(TypedDict):
    """A function call's arguments done (with its `name`), or an MCP call's."""

    type: str
    item_id: str
    output_index: int
    arguments: str
    name: NotRequired[str]
    sequence_number: NotRequired[int]


class McpCallEndEvent(TypedDict):
    """response.mcp_call.completed or .failed."""

    type: str
    item_id: str
    output_index: int
    sequence_number: NotRequired[int]


class ErrorEvent(TypedDict):
    type: Literal["error"]
    code: str | None
    message: str
    param: str | None
    sequence_number: NotRequired[int]


Event = (ResponseEvent | ItemEvent | PartEvent | DeltaEvent | TextDoneEvent | ArgumentsDoneEvent | McpCallEndEvent
         | ErrorEvent)


class StoredEntry(TypedDict):
    """A stored response's entry (store.py): the responses before it, its turn's messages, the response."""

    chain: list[str]
    messages: list[Message]
    response: Response
