"""What the Ollama door writes, in Ollama's wire format, as types: its chat's NDJSON lines (and the whole answer, its
last line), an error line, and its model list. What its clients send is read as JSON and narrowed where it is read
(request.py, messages.py)."""

from typing import Literal, NotRequired, TypedDict

from app.openai.wire import JSONObject


class Function(TypedDict):
    index: int
    name: str
    arguments: JSONObject  # an object, never JSON text


class ToolCall(TypedDict):
    id: str
    function: Function


class Message(TypedDict):
    role: Literal["assistant"]
    content: str
    thinking: NotRequired[str]
    tool_calls: NotRequired[list[ToolCall]]


class Line(TypedDict):
    """A line of the chat's stream."""

    model: str
    created_at: str
    message: Message
    done: bool


class Durations(TypedDict):
    """Nanoseconds, as Ollama counts them."""

    total_duration: int
    load_duration: int
    prompt_eval_duration: int
    eval_duration: int


class Ending(Durations):
    done_reason: str
    prompt_eval_count: int
    eval_count: int


class LastLine(Line, Ending):
    """The stream's last line, `done: true`; the whole answer too."""


class ErrorLine(TypedDict):
    error: str


Chunk = Line | LastLine | ErrorLine


class Details(TypedDict):
    parent_model: str
    format: str
    family: str
    families: list[str] | None
    parameter_size: str
    quantization_level: str


class Tag(TypedDict):
    """A model as `GET /api/tags` lists it."""

    name: str
    model: str
    modified_at: str
    size: int
    digest: str
    details: Details


class Tags(TypedDict):
    models: list[Tag]


class Shown(TypedDict):
    """A model as `POST /api/show` shows it."""

    modelfile: str
    parameters: str
    template: str
    details: Details
    model_info: dict[str, str | int]
    capabilities: list[str]
    modified_at: str
