"""The chat completion's body a door makes of its own request, as the door wrote it: before the door's route hands it
to the chat service, which checks it (app/api/chat_body.py, `ChatCompletionRequest`) as it checks a Chat Completions
client's.

What a door translated is typed as the door wrote it (the messages, a tool's name, a reasoning effort); what it passes
on as its client sent it (a model's name, a sampling value, Ollama's tools) is JSON that nothing has checked yet
(`JSONValue`), for that check and the upstream to judge: a door never refuses what the chat API would take.
"""

from typing import Literal, NotRequired, Required, TypedDict

from app.openai.wire import JSONObject, JSONValue, Message


class FunctionSent(TypedDict, total=False):
    """A client's function tool as a door passes it on: its name read, the rest as the client sent it."""

    name: Required[str]
    description: JSONValue
    parameters: JSONValue  # a JSON Schema
    strict: JSONValue


class ToolSent(TypedDict):
    type: Literal["function"]
    function: FunctionSent


class NamedFunction(TypedDict):
    name: str


class NamedToolChoice(TypedDict):
    """`tool_choice` naming the one function the model must call."""

    type: Literal["function"]
    function: NamedFunction


ToolChoice = str | NamedToolChoice  # "auto", "none", "required", or a named function


class ResponseFormat(TypedDict):
    """`response_format`: a JSON object, or JSON following `json_schema` (its name and schema, as the client gave
    them)."""

    type: Literal["json_object", "json_schema"]
    json_schema: NotRequired[JSONObject]


class DoorOptions(TypedDict, total=False):
    """Everything of a door's chat body but its messages."""

    model: JSONValue  # the Messages and Ollama doors checked it is a string; the Responses door passes it on
    stream: bool
    tools: list[ToolSent] | list[JSONValue]  # Ollama's are the chat API's, passed on as sent
    tool_choice: ToolChoice
    parallel_tool_calls: JSONValue
    max_tokens: JSONValue
    temperature: JSONValue
    top_p: JSONValue
    stop: JSONValue
    seed: JSONValue
    presence_penalty: JSONValue
    frequency_penalty: JSONValue
    metadata: JSONValue
    user: JSONValue
    response_format: ResponseFormat
    reasoning_effort: str


class DoorBody(DoorOptions, total=False):
    """A chat completion's body as a door made it."""

    messages: Required[list[Message]]
