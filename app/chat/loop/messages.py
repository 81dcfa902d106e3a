"""What the model is sent: the first request built from the client's body, its instructions in one first system
message, the system hint, each round's calls and results (and the images they returned) added to the history,
and the tool choice forced or released between rounds. Pure: data in, data out."""

from collections.abc import Sequence

from app.chat.answer import strip_trace
from app.chat.ports import ImagePart, RestoredHistory, ToolOutput
from app.openai.accumulate import ToolCall
from app.openai.schemas import image_part
from app.openai.wire import ChatBody, Content, ContentPart, Message, Tool


def first_request(
    body: ChatBody, offered: Sequence[Tool], client_tool_names: set[str],
    client_tools: list[Tool],
) -> ChatBody:
    request = body.copy()
    # A client tool keeps its name. The pool already renamed ours away from the client's; one that still
    # clashes (a runner that did not) is left out rather than sent twice.
    mcp_tools = [tool for tool in offered if tool.get("function", {}).get("name") not in client_tool_names]
    if mcp_tools or client_tools != (body.get("tools") or []):  # the budget may have left out or compacted some
        request["tools"] = [*client_tools, *mcp_tools]
        if not request["tools"]:  # the budget left nothing: no empty list, which some servers refuse
            del request["tools"]
            request.pop("tool_choice", None)
    # A client that does not stream gets whole upstream answers: one JSON read instead of a chunk
    # per token. Streamed, usage is summed over every round, so it is asked for either way.
    if body.get("stream"):
        request["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
    return request


def forbid_calls(request: ChatBody) -> None:
    # Keep the tools so the model still understands the history; only forbid calling them.
    if request.get("tools"):
        request["tool_choice"] = "none"


def release_forced_choice(request: ChatBody) -> None:
    # "required" or a named function forced the first call; repeating it would never let the model answer.
    choice = request.get("tool_choice")
    if choice == "required" or isinstance(choice, dict):
        del request["tool_choice"]


def without_traces(messages: Sequence[Message]) -> RestoredHistory:
    """Without memory: the history with our traces removed, nothing given back."""
    cleaned = []
    for message in messages:
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, str) and strip_trace(content) != content:
            message = {**message, "content": strip_trace(content)}
        cleaned.append(message)
    return RestoredHistory(cleaned, [], 0)


# The roles that instruct the model. Chat templates know `system` first and nowhere else: Gemma's and
# Mistral's raise on `developer` (which OpenAI's SDKs and Codex send) and on a system message later on.
INSTRUCTING = frozenset({"system", "developer"})


def with_instructions(messages: Sequence[Message], *hints: str | None) -> list[Message]:
    """The history with every system and developer message joined, in order and a blank line apart, into one
    system message first (the history itself when it has at most one, already first and `system`), and each hint
    that is given added to it (`with_system_hint`), in order."""
    found = [index for index, message in enumerate(messages) if message.get("role") in INSTRUCTING]
    instructed = list(messages)
    if found and not (found == [0] and messages[0]["role"] == "system"):
        parts: list[ContentPart] = []
        for index in found:
            own = _parts(messages[index].get("content"))
            parts += [{"type": "text", "text": "\n\n"}, *own] if parts and own else own
        text_only = all(part.get("type") == "text" for part in parts)
        system: Message = {"role": "system",
                           "content": "".join(part.get("text", "") for part in parts) if text_only else parts}
        instructed = [system, *(message for message in messages if message.get("role") not in INSTRUCTING)]
    for hint in hints:
        if hint:
            instructed = with_system_hint(instructed, hint)
    return instructed


def _parts(content: Content) -> list[ContentPart]:
    if isinstance(content, list):
        return content
    return [{"type": "text", "text": content}] if isinstance(content, str) and content else []


def with_system_hint(messages: list[Message], hint: str) -> list[Message]:
    """The hint added once: to the client's own system message if it has one, else as a new one first."""
    first = messages[0] if messages else None
    # with_instructions made the instructions one system message first
    if first is not None and first.get("role") == "system":
        content = first.get("content")
        if isinstance(content, str):
            if hint in content:
                return messages
            return [{**first, "content": f"{content}\n\n{hint}"}, *messages[1:]]
        if isinstance(content, list):
            if any(part.get("text") == hint for part in content):
                return messages
            return [{**first, "content": [*content, {"type": "text", "text": hint}]}, *messages[1:]]
    return [{"role": "system", "content": hint}, *messages]


def round_messages(
    messages: Sequence[Message], content: str, calls: list[ToolCall], outputs: list[ToolOutput], *,
    images_seen: bool,
) -> list[Message]:
    """The history for the next round: this round's calls and their results, and the images they returned
    if the model can see them."""
    following = [*messages, assistant_message(content, calls), *tool_messages(calls, outputs)]
    images = [image for output in outputs for image in output.images]
    if images and images_seen:
        following.append(image_message(images))
    return following


def image_message(images: list[ImagePart]) -> Message:
    # Tool messages carry text only, so a vision model sees the images in a user turn right after them.
    parts: list[ContentPart] = [{"type": "text", "text": "Images returned by the tool calls above:"}]
    parts += [image_part(i.mime_type, i.data) for i in images]
    return {"role": "user", "content": parts}


def assistant_message(content: str, calls: list[ToolCall]) -> Message:
    # "" rather than null: OpenAI, LM Studio and llama.cpp take either, llama-cpp-python's server only a string.
    return {"role": "assistant", "content": content, "tool_calls": [c.to_message_part() for c in calls]}


def tool_messages(calls: list[ToolCall], outputs: list[ToolOutput]) -> list[Message]:
    return [
        {"role": "tool", "tool_call_id": call.id, "content": output.content}
        for call, output in zip(calls, outputs, strict=True)
    ]


def rounds(added: list[Message]) -> list[Message]:
    """This request's rounds as memory keeps them: calls and results, without the images shown after them."""
    return [message for message in added if message.get("role") != "user"]
