"""MCP results made into what the model reads: a tool call's result, a resource read or a listing, and
failures on the gateway's side, as the envelope or text of app/openai/result_format.py.

`data` is `structuredContent` when the tool gave it, else the content blocks (JSON text parsed),
one value when there is one block, a list otherwise. Failures on either side carry a kind the model
can act on (`invalid_arguments` with the fields, `timeout` with `retry_after`, `unknown_tool` with
the nearest names, `server_unavailable`, `tool_error`). A call the server holds for the person's
answers (`input_required`) is neither: it carries the questions (`input_needed`). What a result
addresses to the person alone is kept apart (`shown`), whatever the model sees.
"""

import base64
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import assert_never

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ListResourcesResult,
    ReadResourceResult,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from app.chat.ports import InputNeeded
from app.openai.result_format import RenderOptions, cap_text, compact_json, write_envelope
from app.openai.wire import JSONObject, JSONValue


@dataclass(frozen=True)
class Image:
    mime_type: str
    data: str  # base64, as the server sent it


@dataclass(frozen=True)
class ToolOutcome:
    """A tool call's result: the `tool` message content, and images a vision model may also see. `data`,
    `error_kind` and `error_message` are the same result as values, for whoever shows it to people;
    `shown` is what the result addresses to the person, to be shown whatever the model sees."""

    content: str
    is_error: bool
    images: tuple[Image, ...] = ()
    retryable: bool = False  # the same call may succeed later (a timeout, a server coming back)
    data: JSONValue = None  # what the tool returned, as the envelope's `data` holds it before any cut
    error_kind: str | None = None  # "tool_error" or a FailureKind
    error_message: str | None = None
    shown: tuple[Image | str, ...] = ()  # images the user may see, and text meant for the user only, in order
    input_needed: InputNeeded | None = None  # the server's questions, when the call waits for the person's input


class FailureKind(StrEnum):
    INVALID_ARGUMENTS = "invalid_arguments"
    TIMEOUT = "timeout"
    UNKNOWN_TOOL = "unknown_tool"
    SERVER_UNAVAILABLE = "server_unavailable"
    SERVER_ERROR = "server_error"
    QUESTIONS_WAITING = "questions_waiting"  # the call's question was declined: too many wait for people already


def render_result(result: CallToolResult, options: RenderOptions, reader: str | None = None) -> ToolOutcome:
    """`reader`: the tool that reads this server's resources, named in each resource link."""
    visible = [block for block in result.content if _for_assistant(block)]
    images = tuple(Image(b.mime_type, b.data) for b in visible if isinstance(b, ImageContent))
    shown = for_the_user(result.content)
    text_format = options.result_format == "text"
    if result.is_error:
        text = "\n".join(b.text for b in visible if isinstance(b, TextContent)) or "The tool failed without a message."
        content = (cap_text(_plain_text(result, visible), options.max_chars) if text_format
                   else write_envelope("error", {"error": "tool_error", "message": text}, options, {}))
        return ToolOutcome(content, True, images, error_kind="tool_error", error_message=text, shown=shown)
    data, meta = _data(result, visible, reader)
    content = (cap_text(_plain_text(result, visible, reader), options.max_chars) if text_format
               else write_envelope("success", data, options, meta))
    return ToolOutcome(content, False, images, data=data, shown=shown)


def for_the_user(blocks: list[ContentBlock]) -> tuple[Image | str, ...]:
    """What a result shows the person, in order: its images (embedded image resources too) unless meant for
    the assistant alone, and the text meant for the user alone. Text the model also reads is its to relay."""
    shown: list[Image | str] = []
    for block in blocks:
        audience = _audience(block)
        if audience is not None and "user" not in audience:
            continue
        if isinstance(block, ImageContent):
            shown.append(Image(block.mime_type, block.data))
        elif isinstance(block, EmbeddedResource) and isinstance(block.resource, BlobResourceContents):
            if (block.resource.mime_type or "").startswith("image/"):
                shown.append(Image(block.resource.mime_type or "", block.resource.blob))
        elif audience is not None and "assistant" not in audience:
            if isinstance(block, TextContent):
                shown.append(block.text)
            elif isinstance(block, EmbeddedResource) and isinstance(block.resource, TextResourceContents):
                shown.append(block.resource.text)
    return tuple(shown)


def render_resource(result: ReadResourceResult, options: RenderOptions) -> ToolOutcome:
    """A resource read for the model: text as text (JSON parsed), binary described, images also shown to a
    vision model; one item, or a list for several."""
    items = [_contents_item(contents) for contents in result.contents]
    images = tuple(Image(c.mime_type or "", c.blob) for c in result.contents
                   if isinstance(c, BlobResourceContents) and (c.mime_type or "").startswith("image/"))
    data = items[0] if len(items) == 1 else items
    meta = {} if items else {"note": "The resource has no content."}
    if options.result_format == "text":
        text = "\n".join(item if isinstance(item, str) else compact_json(item) for item in items)
        return ToolOutcome(cap_text(text or "(the resource has no content)", options.max_chars), False, images,
                           data=data, shown=images)
    return ToolOutcome(write_envelope("success", data, options, meta), False, images, data=data, shown=images)


def render_listing(result: ListResourcesResult, options: RenderOptions) -> ToolOutcome:
    """A page of a server's resources; `next_cursor` asks for the next one."""
    listed: list[JSONValue] = [{k: v for k, v in (("uri", r.uri), ("name", r.name), ("description", r.description),
                                  ("mime_type", r.mime_type)) if v} for r in result.resources]
    data: JSONObject = {"resources": listed}
    if result.next_cursor:
        data["next_cursor"] = result.next_cursor
    content = cap_text(compact_json(data), options.max_chars) if options.result_format == "text" else (
        write_envelope("success", data, options, {}))
    return ToolOutcome(content, False, data=data)


def _data(result: CallToolResult, visible: list[ContentBlock], reader: str | None) -> tuple[JSONValue, JSONObject]:
    """The envelope's `data` and `meta`: the structured result with its other blocks as attachments, else
    the blocks (one, or a list), else nothing and a note why."""
    meta: JSONObject = {}
    items = [_item(block, reader) for block in visible]
    if result.structured_content is not None:
        attachments = [item for item, b in zip(items, visible, strict=True) if not isinstance(b, TextContent)]
        if attachments:
            meta["attachments"] = attachments
        return result.structured_content, meta
    if not items:
        meta["note"] = (
            "The tool's output was meant for the user only." if result.content else "The tool returned no content."
        )
        return None, meta
    return (items[0] if len(items) == 1 else items), meta


def render_input_needed(needed: InputNeeded, options: RenderOptions) -> ToolOutcome:
    """A call the server holds until the person answers its questions (MCP 2026's `input_required`): neither a
    result nor a failure; the chat loop asks the person and sends the call again with the answers."""
    message = "The tool is waiting for the person to answer its question; the call goes on once they answer."
    content = message if options.result_format == "text" else write_envelope(
        "input_required", {"message": message}, options, {})
    return ToolOutcome(content, False, input_needed=needed)


def render_failure(kind: FailureKind, message: str, options: RenderOptions, **details: JSONValue) -> ToolOutcome:
    """A failure on the gateway's side (bad arguments, timeout, server down) told to the model."""
    retryable = kind in (FailureKind.TIMEOUT, FailureKind.SERVER_UNAVAILABLE)
    if options.result_format == "text":
        content = cap_text(f"Error: {message}", options.max_chars)
    else:
        content = write_envelope("error", {"error": kind.value, "message": message, **details}, options, {})
    return ToolOutcome(content, True, retryable=retryable, error_kind=kind.value, error_message=message)


def _item(block: ContentBlock, reader: str | None = None) -> JSONValue:
    if isinstance(block, TextContent):
        return _maybe_json(block.text)
    if isinstance(block, ImageContent):
        return {"type": "image", "mime_type": block.mime_type, "size_bytes": _decoded_size(block.data)}
    if isinstance(block, AudioContent):
        return {"type": "audio", "mime_type": block.mime_type, "size_bytes": _decoded_size(block.data)}
    if isinstance(block, ResourceLink):
        link: JSONObject = {"type": "resource_link", "uri": block.uri, "name": block.name}
        if block.mime_type:
            link["mime_type"] = block.mime_type
        if block.description:
            link["description"] = block.description
        if reader:
            link["read_with"] = reader  # a model cannot open a URI; this tool can
        return link
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        if isinstance(resource, TextResourceContents):
            return resource.text
        return {"type": "resource", "uri": resource.uri, "mime_type": resource.mime_type or "application/octet-stream",
                "size_bytes": _decoded_size(resource.blob)}
    assert_never(block)


def _contents_item(contents: TextResourceContents | BlobResourceContents) -> JSONValue:
    if isinstance(contents, TextResourceContents):
        mime = contents.mime_type or ""
        return _maybe_json(contents.text) if "json" in mime or not mime else contents.text
    return {"type": "resource", "uri": contents.uri, "mime_type": contents.mime_type or "application/octet-stream",
            "size_bytes": _decoded_size(contents.blob)}


def _plain_text(result: CallToolResult, visible: list[ContentBlock], reader: str | None = None) -> str:
    parts = [b.text if isinstance(b, TextContent) else _describe(b, reader) for b in visible]
    text = "\n".join(parts)
    if not any(isinstance(b, TextContent) for b in visible) and result.structured_content is not None:
        text = "\n".join([compact_json(result.structured_content), *parts])
    if result.is_error:
        return f"Error: {text or 'the tool reported an error without a message'}"
    return text or "(the tool returned no content)"


def _describe(block: ContentBlock, reader: str | None = None) -> str:
    item = _item(block, reader)
    return item if isinstance(item, str) else compact_json(item)


def _for_assistant(block: ContentBlock) -> bool:
    audience = _audience(block)
    return not audience or "assistant" in audience


def _audience(block: ContentBlock) -> list[str] | None:
    """Whom the block is for, when the server said (None: everyone)."""
    annotations = getattr(block, "annotations", None)
    return getattr(annotations, "audience", None) or None


def _maybe_json(text: str) -> JSONValue:
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
        try:
            parsed: JSONValue = json.loads(stripped)
        except ValueError:
            return text
        return parsed
    return text


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except ValueError:
        return len(data) * 3 // 4
