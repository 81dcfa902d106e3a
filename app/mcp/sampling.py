"""A server's `sampling/createMessage` answered by the upstream model: MCP shapes to OpenAI and back.

Pure conversions; the pool passes in the function that asks the upstream.
"""

from collections.abc import Awaitable, Callable
from typing import Any

from mcp.types import (
    INTERNAL_ERROR,
    CreateMessageRequestParams,
    CreateMessageResult,
    ErrorData,
    ImageContent,
    TextContent,
)

from app.openai.schemas import image_part
from app.openai.wire import ChatBody, ContentPart, Message

# Asks the upstream with an OpenAI chat body; returns (text, finish_reason, model).
Complete = Callable[[ChatBody], Awaitable[tuple[str, str | None, str | None]]]


def to_chat_request(params: CreateMessageRequestParams, default_model: str | None) -> ChatBody:
    """The OpenAI chat body for a sampling request: the server's model hint wins over the configured model."""
    messages: list[Message] = []
    if params.system_prompt:
        messages.append({"role": "system", "content": params.system_prompt})
    for message in params.messages:
        blocks = message.content if isinstance(message.content, list) else [message.content]
        parts = [_part(block) for block in blocks]
        kept = [part for part in parts if part is not None]
        if all(part["type"] == "text" for part in kept):
            messages.append({"role": message.role, "content": "".join(part.get("text", "") for part in kept)})
        else:
            messages.append({"role": message.role, "content": kept})
    body: ChatBody = {"messages": messages, "max_tokens": params.max_tokens}
    hints = params.model_preferences.hints if params.model_preferences and params.model_preferences.hints else []
    model = next((hint.name for hint in hints if hint.name), None) or default_model
    if model:
        body["model"] = model
    if params.temperature is not None:
        body["temperature"] = params.temperature
    if params.stop_sequences:
        body["stop"] = params.stop_sequences
    return body


def to_result(text: str, finish_reason: str | None, model: str | None) -> CreateMessageResult:
    stop = "maxTokens" if finish_reason == "length" else "endTurn"
    return CreateMessageResult(role="assistant", content=TextContent(type="text", text=text),
                               model=model or "unknown", stop_reason=stop)


def sampling_handler(server: str, complete: Complete, default_model: str | None, log: Any) -> Any:
    """The SDK's sampling callback for one server."""

    async def sample(_context: Any, params: CreateMessageRequestParams) -> CreateMessageResult | ErrorData:
        body = to_chat_request(params, default_model)
        log.info("mcp_sampling", server=server, model=body.get("model"), max_tokens=params.max_tokens)
        try:
            text, finish_reason, model = await complete(body)
        except Exception as exc:  # boundary: the server gets an error answer, the gateway goes on
            log.warning("mcp_sampling_failed", server=server, error=str(exc))
            return ErrorData(code=INTERNAL_ERROR, message=f"The model could not answer: {exc}")
        return to_result(text, finish_reason, model or body.get("model"))

    return sample


def _part(block: Any) -> ContentPart | None:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageContent):
        return image_part(block.mime_type, block.data)
    return None  # audio and tool blocks have no place in a plain chat request
