"""The Responses API's `input` made chat messages: a string is one user message; items are messages (text and
image parts), the model's `function_call`s (one assistant message per run of them, as Chat Completions has
them) and their `function_call_output`s (`tool` messages).

What a client sends back of an earlier answer that the model does not need is left out: `reasoning` items (the
trace), and `mcp_call` and `mcp_list_tools` items (conversation memory gives the model the earlier MCP calls and
results again, from the answer's text, as it does for Chat Completions). An item the gateway cannot serve (a
file, a hosted tool's call, a reference to an item stored elsewhere) is refused naming it, never left out.
"""

from app.openai.errors import InvalidRequest
from app.openai.wire import ContentPart, ImageURL, JSONObject, JSONValue, Message, ToolCallPart

_ROLES = frozenset({"user", "assistant", "system", "developer"})
_LEFT_OUT = frozenset({"reasoning", "mcp_call", "mcp_list_tools"})
_TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
# Between a `namespace` tool's name and its function's, in the name the model is offered (a chat API has no
# namespaces): `multi_agent_v1__spawn_agent`.
NAMESPACE_JOINT = "__"


def input_messages(value: JSONValue) -> list[Message]:
    """The chat messages of a request's `input`.

    Raises:
        InvalidRequest: an item or part that cannot be translated, named by its place (`input[2].content[0]`).
    """
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list):
        raise InvalidRequest("`input` must be a string or a list of input items.", param="input")
    messages: list[Message] = []
    for index, item in enumerate(value):
        where = f"input[{index}]"
        if not isinstance(item, dict):
            raise InvalidRequest(f"`{where}` must be an object.", param=where)
        kind = item.get("type", "message")
        if not isinstance(kind, str):  # a list or an object as `type` would fail the lookups below
            raise InvalidRequest(f"`{where}.type` must be a string.", param=f"{where}.type")
        if kind == "message":
            _add_message(messages, _message(item, where))
        elif kind == "function_call":
            _add_call(messages, _call(item, where))
        elif kind == "function_call_output":
            messages.append(_call_output(item, where))
        elif kind not in _LEFT_OUT:
            raise InvalidRequest(f"Input items of type {kind!r} cannot be served by this gateway: it runs only the "
                                 "client's function tools and its own MCP tools, and keeps no items but its "
                                 "responses (use previous_response_id).", param=f"{where}.type")
    return messages


def _add_message(messages: list[Message], message: Message) -> None:
    """Appends the message; an assistant's text right after the assistant's own text is the same message, as the
    gateway's answer gives it in several items (text, then a trace, then more text)."""
    last = messages[-1] if messages else None
    if (message["role"] == "assistant" and last is not None and last["role"] == "assistant"
            and "tool_calls" not in last and isinstance(text := last.get("content"), str)
            and isinstance(more := message.get("content"), str)):  # an assistant's, from _message: always text
        last["content"] = text + more
        return
    messages.append(message)


def _add_call(messages: list[Message], call: ToolCallPart) -> None:
    """Appends a call to the assistant message before it (its text, or the calls of the same run), else to a new
    one: a chat model made them as one message."""
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant":
        last.setdefault("tool_calls", []).append(call)
        last["content"] = last.get("content") or None
        return
    messages.append({"role": "assistant", "content": None, "tool_calls": [call]})


def _message(item: JSONObject, where: str) -> Message:
    role = item.get("role")
    if not isinstance(role, str) or role not in _ROLES:
        raise InvalidRequest(f"`{where}.role` must be one of {sorted(_ROLES)}.", param=f"{where}.role")
    content = item.get("content")
    if isinstance(content, str):
        return {"role": role, "content": content}
    if not isinstance(content, list):
        raise InvalidRequest(f"`{where}.content` must be a string or a list of parts.", param=f"{where}.content")
    parts = [_part(part, f"{where}.content[{index}]") for index, part in enumerate(content)]
    if role == "user" and any(part["type"] != "text" for part in parts):
        return {"role": role, "content": parts}
    if role != "user" and any(part["type"] != "text" for part in parts):
        raise InvalidRequest(f"Only a user message can hold images (`{where}`).", param=f"{where}.content")
    # Text alone is a string: what a chat client sends, and what memory recognises an earlier answer by.
    return {"role": role, "content": "".join(part["text"] for part in parts)}


def _part(part: JSONValue, where: str) -> ContentPart:
    """One content part as a chat part: text (the refusal's words too), or an image by URL or data URL."""
    if not isinstance(part, dict):
        raise InvalidRequest(f"`{where}` must be an object.", param=where)
    kind = part.get("type")
    if not isinstance(kind, str):
        raise InvalidRequest(f"`{where}.type` must be a string.", param=f"{where}.type")
    if kind in _TEXT_PARTS or kind == "refusal":
        text = part.get("refusal") if kind == "refusal" else part.get("text")
        if not isinstance(text, str):
            raise InvalidRequest(f"`{where}` has no text.", param=where)
        return {"type": "text", "text": text}
    if kind == "input_image":
        url = part.get("image_url")
        if not isinstance(url, str) or not url:
            raise InvalidRequest(f"`{where}`: only images given by `image_url` (a URL or a data URL) can be served; "
                                 "this gateway has no file store for `file_id`.", param=f"{where}.image_url")
        image: ImageURL = {"url": url}
        if isinstance(detail := part.get("detail"), str):
            image["detail"] = detail
        return {"type": "image_url", "image_url": image}
    raise InvalidRequest(f"Content parts of type {kind!r} cannot be served by this gateway (text and images only).",
                         param=f"{where}.type")


def _call(item: JSONObject, where: str) -> ToolCallPart:
    """A `function_call` item as a chat tool call: its `call_id` is the id the output answers; a namespaced
    function named as the model was offered it (`namespace__name`)."""
    call_id, name, arguments = (_string(item, field, where) for field in ("call_id", "name", "arguments"))
    namespace = item.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        raise InvalidRequest(f"`{where}.namespace` must be a string.", param=f"{where}.namespace")
    called = f"{namespace}{NAMESPACE_JOINT}{name}" if namespace else name
    return {"id": call_id, "type": "function", "function": {"name": called, "arguments": arguments}}


def _string(item: JSONObject, field: str, where: str) -> str:
    value = item.get(field)
    if not isinstance(value, str):
        raise InvalidRequest(f"`{where}.{field}` must be a string.", param=f"{where}.{field}")
    return value


def _call_output(item: JSONObject, where: str) -> Message:
    """A `function_call_output` as a `tool` message; an output given as parts is their text."""
    call_id, output = item.get("call_id"), item.get("output")
    if not isinstance(call_id, str):
        raise InvalidRequest(f"`{where}.call_id` must be a string.", param=f"{where}.call_id")
    if isinstance(output, list):
        parts = [_part(part, f"{where}.output[{index}]") for index, part in enumerate(output)]
        if any(part["type"] != "text" for part in parts):
            raise InvalidRequest(f"`{where}.output`: a function's output can only be text here.",
                                 param=f"{where}.output")
        output = "".join(part["text"] for part in parts)
    if not isinstance(output, str):
        raise InvalidRequest(f"`{where}.output` must be a string or a list of text parts.", param=f"{where}.output")
    return {"role": "tool", "tool_call_id": call_id, "content": output}
