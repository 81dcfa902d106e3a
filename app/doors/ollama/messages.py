"""Ollama's chat messages as the chat API's: images as image parts, tool calls with ids and JSON-text arguments,
and each `tool` message paired with the call it answers.

Ollama's own server takes `tool_call_id`, but the `ollama` library drops it (its Message has no such field) and
older clients never sent one: a tool message is then paired with the first unanswered call of the assistant
message before it that has its `tool_name`, else the first unanswered one, so the chat API's `tool_call_id`
names the call it answers. The assistant's `thinking` is not sent back: the chat API has no place for it.
"""

import base64
import binascii
import json
import os
from dataclasses import dataclass, field

import orjson

from app.openai.errors import InvalidRequest
from app.openai.wire import Content, ContentPart, JSONValue, Message, ToolCallPart

_ROLES = ("system", "user", "assistant", "tool")
# The image types a model server reads, by their first bytes; anything else is sent as PNG, Ollama's usual.
_MAGIC = ((b"\x89PNG", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF8", "image/gif"), (b"BM", "image/bmp"))
_DECODED_AT_ONCE = 1 << 20  # base64 characters, a multiple of 4: a slice decodes on its own


@dataclass
class _Unanswered:
    """The calls of the last assistant message that no tool message has answered yet, in order: (id, name)."""

    calls: list[tuple[str, str]] = field(default_factory=list)

    def answer(self, call_id: JSONValue, name: JSONValue, where: str) -> str:
        """The id of the call a tool message answers (its own `tool_call_id` when it has one)."""
        if isinstance(call_id, str) and call_id:
            self.calls = [call for call in self.calls if call[0] != call_id]
            return call_id
        named = [call for call in self.calls if call[1] == name]
        if not (named or self.calls):
            raise InvalidRequest(f"`{where}` is a tool result, but no assistant tool call before it is unanswered.",
                                 param=where)
        chosen = (named or self.calls)[0]
        self.calls.remove(chosen)
        return chosen[0]


def chat_messages(messages: list[JSONValue]) -> list[Message]:
    """The chat API's messages for Ollama's.

    Raises:
        InvalidRequest: a message that cannot be translated, named by its index.
    """
    unanswered = _Unanswered()
    translated: list[Message] = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise InvalidRequest(f"`{where}` must be an object.", param=where)
        role = message.get("role")
        if not isinstance(role, str) or role not in _ROLES:
            raise InvalidRequest(f"`{where}.role` must be one of {', '.join(_ROLES)}.", param=f"{where}.role")
        content = _text(message.get("content"), f"{where}.content")
        if role == "tool":
            call_id = unanswered.answer(message.get("tool_call_id"), message.get("tool_name"), where)
            translated.append({"role": "tool", "tool_call_id": call_id, "content": content})
            continue
        chat: Message = {"role": role, "content": _with_images(content, message.get("images"), role, where)}
        if role == "assistant" and message.get("tool_calls"):
            calls = chat["tool_calls"] = _tool_calls(message["tool_calls"], f"{where}.tool_calls")
            unanswered.calls = [(call["id"], call["function"]["name"]) for call in calls]
        translated.append(chat)
    return translated


def _text(content: JSONValue, where: str) -> str:
    if content is None:
        return ""  # Ollama's messages may leave it out (an assistant's tool calls, a user's images alone)
    if not isinstance(content, str):
        raise InvalidRequest(f"`{where}` must be a string.", param=where)
    return content


def _with_images(content: str, images: JSONValue, role: str, where: str) -> Content:
    """The text, and the message's images after it as data-URL image parts (the chat API takes them from the
    user alone)."""
    if not images:
        return content
    where = f"{where}.images"
    if not isinstance(images, list) or not all(isinstance(image, str) for image in images):
        raise InvalidRequest(f"`{where}` must be a list of base64-encoded images.", param=where)
    if role != "user":
        raise InvalidRequest(f"`{where}`: only a user message can carry images through this API.", param=where)
    parts: list[ContentPart] = [{"type": "text", "text": content}] if content else []
    parts += [{"type": "image_url", "image_url": {"url": _data_url(image, where)}}
              for image in images if isinstance(image, str)]  # each is: checked above
    return parts


def _data_url(image: str, where: str) -> str:
    """A data URL for one image, its type read from its first bytes."""
    if image.startswith("data:image/"):
        return image  # a client that sent a data URL already
    try:
        head = _first_bytes(image)
    except (binascii.Error, ValueError):
        raise InvalidRequest(f"`{where}` must hold base64-encoded images.", param=where) from None
    return f"data:{_image_type(head)};base64,{image}"


def _first_bytes(image: str) -> bytes:
    """An image's first bytes, all of it decoded (a broken image is refused here, not upstream), a slice at a time:
    decoding 40 MB at once held the GIL, and so every other request, for 60 ms.

    Raises:
        binascii.Error, ValueError: not base64 (padding only at the very end, as when decoded whole).
    """
    head = b""
    for start in range(0, len(image), _DECODED_AT_ONCE):
        piece = image[start:start + _DECODED_AT_ONCE]
        if "=" in piece and start + _DECODED_AT_ONCE < len(image):
            raise binascii.Error("padding before the end")
        decoded = base64.b64decode(piece, validate=True)
        head = head or decoded[:16]
    return head


def _image_type(head: bytes) -> str:
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return next((kind for magic, kind in _MAGIC if head.startswith(magic)), "image/png")


def _tool_calls(calls: JSONValue, where: str) -> list[ToolCallPart]:
    """An assistant's tool calls in the chat API's spelling, with an id for each that came without one."""
    if not isinstance(calls, list):
        raise InvalidRequest(f"`{where}` must be a list.", param=where)
    translated: list[ToolCallPart] = []
    for index, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(name := function.get("name"), str):
            raise InvalidRequest(f"`{where}[{index}].function.name` is required.", param=f"{where}[{index}]")
        call_id = call.get("id") if isinstance(call, dict) else None  # a dict: it has a function
        arguments = arguments_text(function.get("arguments"), f"{where}[{index}].function.arguments")
        translated.append({
            "id": call_id if isinstance(call_id, str) and call_id else f"call_{os.urandom(12).hex()}",
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        })
    return translated


def arguments_text(arguments: JSONValue, where: str) -> str:
    """A tool call's arguments as the chat API's JSON text: Ollama gives an object (some clients the text)."""
    if isinstance(arguments, str):
        try:
            arguments = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            raise InvalidRequest(f"`{where}` must be a JSON object.", param=where) from None
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise InvalidRequest(f"`{where}` must be an object.", param=where)
    try:
        return orjson.dumps(arguments).decode()
    except orjson.JSONEncodeError:  # what Python's parser read and orjson cannot write: integers past 64 bits,
        pass  # nesting past 255 levels (a lone surrogate is refused where the body is sent: app/upstream/client.py)
    try:
        return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    except RecursionError:
        raise InvalidRequest(f"`{where}` is nested too deeply.", param=where) from None
