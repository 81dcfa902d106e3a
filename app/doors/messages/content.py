"""Anthropic's conversation made chat messages: `system`, and each message's content blocks (text, images, the
client's tool calls and their results). A block the chat API cannot carry is a 400 naming it, never dropped in
silence; only the model's own thinking in the history is left out (the chat API takes none back)."""

import json

from app.openai.errors import InvalidRequest
from app.openai.schemas import image_part
from app.openai.wire import ContentPart, JSONObject, JSONValue, Message, ToolCallPart

# Tool results' images follow their tool messages in a user turn, as the gateway sends MCP tools' images
# (app/chat/loop/state.py): a chat `tool` message carries text only.
IMAGES_INTRO = "Images returned by the tool calls above:"
FAILED_PREFIX = "Error: "  # the gateway's own text results say a failure the same way (app/openai/result_format.py)
DROPPED = frozenset({"thinking", "redacted_thinking"})  # Anthropic's signed reasoning: no chat model reads it back
_NOT_SERVED = {
    "document": "document blocks (PDFs, text documents, citations) are not served by toolbridge: send the "
                "document's text in a text block",
    "search_result": "search result blocks (with citations) are not served by toolbridge: send the results as text",
}


def invalid(field: str, problem: str) -> InvalidRequest:
    """A 400 that names the field, the way Anthropic's own errors do (`max_tokens: Field required`)."""
    return InvalidRequest(f"{field}: {problem}", param=field)


def chat_messages(system: JSONValue, messages: JSONValue) -> list[Message]:
    """The chat messages of a Messages request: its system prompt first, then each message in turn. A `system`
    message among them (Claude Code sends one after the user's) joins the system prompt: the chat templates of
    Gemma and Mistral refuse a system message anywhere but first, and LM Studio answers that with an error."""
    chat: list[Message] = []
    prompts = [] if system is None else [block_text(system, "system", "\n\n")]
    if not isinstance(messages, list) or not messages:
        raise invalid("messages", "a non-empty list of messages is required")
    for number, message in enumerate(messages):
        where = f"messages.{number}"
        if not isinstance(message, dict):
            raise invalid(where, "each message must be an object with 'role' and 'content'")
        role, content = message.get("role"), message.get("content")
        if role == "user":
            chat += _user(content, where)
        elif role == "assistant":
            chat.append(_assistant(content, where))
        elif role == "system":
            prompts.append(block_text(content, f"{where}.content", "\n\n"))
        else:
            raise invalid(f"{where}.role", "must be 'user' or 'assistant'")
    return [{"role": "system", "content": "\n\n".join(prompts)}, *chat] if prompts else chat


def block_text(content: JSONValue, where: str, joint: str) -> str:
    """Content that may hold text alone (a system prompt, a tool result's text): a string or text blocks."""
    return joint.join(_text(block, f"{where}.{number}") for number, block in enumerate(_blocks(content, where)))


def _blocks(content: JSONValue, where: str) -> list[JSONObject]:
    """A message's content as blocks: a string is one text block. Each is an object whose `type` is a string."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise invalid(where, "must be a string or a list of content blocks")
    blocks: list[JSONObject] = []
    for number, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise invalid(f"{where}.{number}", "each content block must be an object with a string 'type'")
        blocks.append(block)
    return blocks


def _user(content: JSONValue, where: str) -> list[Message]:
    """A user message: its tool results first (each a `tool` message), then the rest of what it says."""
    results: list[Message] = []
    returned: list[ContentPart] = []  # the results' images
    parts: list[ContentPart] = []
    for number, block in enumerate(_blocks(content, f"{where}.content")):
        at = f"{where}.content.{number}"
        if block["type"] == "tool_result":
            result, images = _tool_result(block, at)
            results.append(result)
            returned += images
        elif block["type"] not in DROPPED:
            parts.append(_part(block, at))
    if returned:
        parts = [{"type": "text", "text": IMAGES_INTRO}, *returned, *parts]
    if not parts:
        return results
    if all(part["type"] == "text" for part in parts):
        return [*results, {"role": "user", "content": "\n\n".join(part["text"] for part in parts)}]
    return [*results, {"role": "user", "content": parts}]


def _assistant(content: JSONValue, where: str) -> Message:
    """An assistant message: its text, and the client's tool calls it made (thinking left out)."""
    texts: list[str] = []
    calls: list[ToolCallPart] = []
    for number, block in enumerate(_blocks(content, f"{where}.content")):
        at = f"{where}.content.{number}"
        if block["type"] == "tool_use":
            calls.append(_tool_call(block, at))
        elif block["type"] not in DROPPED:
            texts.append(_text(block, at))
    # Joined as they were said: the gateway's answer split its text into blocks only around its reasoning, so
    # conversation memory recognises the turn it answered.
    message: Message = {"role": "assistant", "content": "".join(texts)}
    if calls:
        message["tool_calls"] = calls
    return message


def _text(block: JSONObject, at: str) -> str:
    if block["type"] != "text":
        raise invalid(f"{at}.type", _refusal(str(block["type"])))
    if not isinstance(block.get("text"), str):
        raise invalid(f"{at}.text", "a text block needs a string 'text'")
    if block.get("citations"):
        raise invalid(f"{at}.citations", "citations are not served by toolbridge")
    return str(block["text"])


def _part(block: JSONObject, at: str) -> ContentPart:
    """A user message's block as a chat content part: text, or an image."""
    if block["type"] == "image":
        return _image(block, at)
    return {"type": "text", "text": _text(block, at)}


def _image(block: JSONObject, at: str) -> ContentPart:
    source = block.get("source")
    kind = source.get("type") if isinstance(source, dict) else None
    if kind == "base64" and isinstance(source, dict) and isinstance(data := source.get("data"), str):
        media_type = str(source.get("media_type") or "image/png")
        return image_part(media_type, data)
    if kind == "url" and isinstance(source, dict) and isinstance(url := source.get("url"), str):
        return {"type": "image_url", "image_url": {"url": url}}
    if kind == "file":
        raise invalid(f"{at}.source", "images from Anthropic's Files API are not served by toolbridge: send the "
                                      "image as base64 or a URL")
    raise invalid(f"{at}.source", "an image needs a source of type 'base64' (with media_type and data) or 'url'")


def _tool_call(block: JSONObject, at: str) -> ToolCallPart:
    """A tool_use block of the history as the chat API's tool call: its input as JSON arguments."""
    call_id, name, arguments = block.get("id"), block.get("name"), block.get("input", {})
    if not isinstance(call_id, str) or not isinstance(name, str):
        raise invalid(at, "a tool_use block needs a string 'id' and 'name'")
    if not isinstance(arguments, dict):
        raise invalid(f"{at}.input", "must be an object")
    try:
        text = json.dumps(arguments, ensure_ascii=False)
    except RecursionError:  # read (orjson reads 1,024 levels), but nested past what the standard library writes
        raise invalid(f"{at}.input", "nested too deeply") from None
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def _tool_result(block: JSONObject, at: str) -> tuple[Message, list[ContentPart]]:
    """A tool_result block as a `tool` message (a failure said as such), and the images it returned."""
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str):
        raise invalid(f"{at}.tool_use_id", "a tool_result block needs a string 'tool_use_id'")
    texts: list[str] = []
    images: list[ContentPart] = []
    for number, item in enumerate(_blocks(block.get("content") or "", f"{at}.content")):
        if item["type"] == "image":
            images.append(_image(item, f"{at}.content.{number}"))
        else:
            texts.append(_text(item, f"{at}.content.{number}"))
    text = "\n\n".join(texts)
    if block.get("is_error") is True:
        text = FAILED_PREFIX + text
    return {"role": "tool", "tool_call_id": call_id, "content": text}, images


def _refusal(kind: str) -> str:
    """Why a block of this kind is refused where a text block was expected."""
    if kind in _NOT_SERVED:
        return _NOT_SERVED[kind]
    if kind in ("text", "image", "tool_use", "tool_result"):
        return f"a '{kind}' block is not taken here: a text block was expected"
    return (f"'{kind}' blocks are not served by toolbridge (Anthropic's server tools and their results, containers "
            "and files exist only on Anthropic's side)")
