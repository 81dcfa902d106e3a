"""Ollama's chat request (`POST /api/chat`) as a chat completion's body for the chat service.

What Ollama's API says its own way is said in the chat API's: `images` (bare base64) become image parts,
tool calls' `arguments` objects become JSON text with ids, a `tool` message (which names its tool, and often
carries no id: the `ollama` library drops one) is paired with the call it answers, `think` levels become
`reasoning_effort`, `format` a `response_format`, and the sampling `options` the chat API has become its fields.
Streaming is on unless `stream` is false, as in Ollama. What cannot be translated is refused with a 400 naming
the field, never sent upstream half-translated.
"""

from typing import Literal

from app.doors.body import DoorBody, DoorOptions
from app.doors.ollama.messages import chat_messages
from app.openai.errors import InvalidRequest
from app.openai.wire import JSONObject, JSONValue

# Ollama's thinking levels as the chat API's `reasoning_effort`; its "max" is the chat API's highest.
_EFFORTS = {"low": "low", "medium": "medium", "high": "high", "max": "high"}
# Ollama's `options` that the chat API has under the same name; num_predict is its max_tokens. The rest
# (num_ctx, num_gpu, mirostat...) set up Ollama's own runner: the upstream's model is already loaded as it is.
_SameOption = Literal["temperature", "top_p", "seed", "stop", "presence_penalty", "frequency_penalty"]
_SAME_OPTIONS: tuple[_SameOption, ...] = (
    "temperature", "top_p", "seed", "stop", "presence_penalty", "frequency_penalty")


def chat_body(body: JSONObject) -> DoorBody:
    """The chat completion's body for Ollama's chat request `body`.

    Raises:
        InvalidRequest: a field that cannot be translated, named in the message.
    """
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequest("`model` is required: the name of a model of GET /api/tags.", param="model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("`messages` must be a list of at least one message.", param="messages")
    chat: DoorBody = {"model": model, "messages": chat_messages(messages), "stream": wants_stream(body)}
    tools = body.get("tools")
    if tools:
        if not isinstance(tools, list):
            raise InvalidRequest("`tools` must be a list of function tools.", param="tools")
        chat["tools"] = tools  # Ollama's tools are the chat API's function tools, spelled the same
    return {**chat, **_think(body.get("think")), **_format(body.get("format")), **_options(body.get("options"))}


def wants_stream(body: JSONObject) -> bool:
    """Whether the answer is streamed: Ollama streams unless `stream` is false."""
    stream = body.get("stream")
    if stream is None:
        return True
    if not isinstance(stream, bool):
        raise InvalidRequest("`stream` must be true or false.", param="stream")
    return stream


def _think(think: JSONValue) -> DoorOptions:
    """A thinking level as `reasoning_effort`; true and false leave the model's own default (the chat API has no
    switch for it). Whether reasoning is shown does not depend on it: see ollama_answer.py."""
    if think is None or isinstance(think, bool):
        return {}
    if isinstance(think, str) and think in _EFFORTS:
        return {"reasoning_effort": _EFFORTS[think]}
    raise InvalidRequest('`think` must be true, false, "low", "medium", "high" or "max".', param="think")


def _format(value: JSONValue) -> DoorOptions:
    """`format`: "json" is a JSON object answer, an object a JSON schema the answer follows."""
    if value is None or value == "":
        return {}
    if value == "json":
        return {"response_format": {"type": "json_object"}}
    if isinstance(value, dict):
        return {"response_format": {"type": "json_schema", "json_schema": {"name": "response", "schema": value}}}
    raise InvalidRequest('`format` must be "json" or a JSON schema object.', param="format")


def _options(options: JSONValue) -> DoorOptions:
    """The sampling options the chat API has; num_predict as max_tokens (-1 and -2, "no limit", as none)."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise InvalidRequest("`options` must be an object.", param="options")
    chat: DoorOptions = {}
    for name in _SAME_OPTIONS:
        if options.get(name) is not None:
            chat[name] = options[name]
    predict = options.get("num_predict")
    if predict is not None:
        if not isinstance(predict, int) or isinstance(predict, bool):
            raise InvalidRequest("`options.num_predict` must be an integer.", param="options.num_predict")
        if predict > 0:
            chat["max_tokens"] = predict
    return chat

