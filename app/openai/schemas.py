"""OpenAI wire models. Inbound models accept unknown fields and carry them on untouched, but the fields the
gateway itself reads are checked here, so a malformed request is a 400 naming the field, not a crash later."""

import json
from collections.abc import Callable
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, field_validator, model_validator
from pydantic_core import PydanticCustomError

from app.openai.wire import ContentPart, JSONObject, JSONValue


class WireModel(BaseModel):
    # OpenAI clients send many fields we do not model; the upstream must still get them.
    model_config = ConfigDict(extra="allow")


def content_text(content: object) -> str:
    """A message's text: the string itself, or its text parts joined (images and other parts left out)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(text for part in content if isinstance(part, dict) and isinstance(text := part.get("text"), str))
    return ""


def image_part(mime_type: str | None, base64_data: str) -> ContentPart:
    """An image as a chat message's content part: a `data:` URL of the base64 bytes."""
    return {"type": "image_url", "image_url": {"url": f"data:{mime_type};base64,{base64_data}"}}


def rewrite_model_list(
    body: bytes, rewrite: Callable[[list[JSONValue]], list[JSONValue]],
    answer: Callable[[JSONObject, list[JSONValue]], JSONObject] | None = None,
) -> bytes:
    """A `/models` answer with its `data` list rewritten (and, with `answer`, the whole answer made of the answer
    as sent and the rewritten list); the body as it was when it is not such a list."""
    try:
        models: JSONValue = json.loads(body)
    except ValueError:
        return body
    entries = models.get("data") if isinstance(models, dict) else None
    if not isinstance(models, dict) or not isinstance(entries, list):
        return body
    rewritten = rewrite(entries)
    return json.dumps(answer(models, rewritten) if answer else {**models, "data": rewritten}).encode()


class ChatMessage(WireModel):
    role: StrictStr
    content: object = None  # checked below: text, null or parts

    @field_validator("content")
    @classmethod
    def _text_or_parts(cls, value: object) -> object:
        """A string, null, or a list of parts each with a string `type` (and a string `text` for text parts).
        Kept as the client sent it: parts of types the gateway does not know go on untouched."""
        if value is None or isinstance(value, str):
            return value
        if not isinstance(value, list):
            raise ValueError("must be a string or a list of content parts")
        for number, part in enumerate(value):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise ValueError(f"part {number} must be an object with a string 'type'")
            if part["type"] == "text" and not isinstance(part.get("text"), str):
                raise ValueError(f"part {number} is of type 'text' and needs a string 'text'")
        return value


class FunctionDefinition(WireModel):
    name: StrictStr
    description: StrictStr | None = None
    parameters: dict[str, object] | None = None  # a JSON Schema, sent on as given


class ToolDefinition(WireModel):
    type: StrictStr = "function"
    function: FunctionDefinition | None = None

    @model_validator(mode="after")
    def _functions_are_defined(self) -> Self:
        if self.function is None and self.type == "function":
            raise PydanticCustomError("missing", "a tool of type 'function' needs a 'function' object with a 'name'")
        return self


class ChatCompletionRequest(WireModel):
    model: StrictStr | None = None
    messages: list[ChatMessage] = Field(min_length=1)
    stream: StrictBool = False
    stream_options: dict[str, object] | None = None
    tools: list[ToolDefinition] | None = None
    tool_choice: object = None

    @property
    def include_usage(self) -> bool:
        return bool((self.stream_options or {}).get("include_usage"))
