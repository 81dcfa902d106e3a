"""What the model is sent after each round: the round's calls and results (and the images they returned) added to
the history, and this request's rounds as memory keeps them. The first request is built where the rounds start
(state.py). Pure: data in, data out."""

from collections.abc import Sequence

from app.chat.ports import ImagePart, ToolOutput
from app.openai.accumulate import ToolCall
from app.openai.schemas import image_part
from app.openai.wire import ContentPart, Message


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
