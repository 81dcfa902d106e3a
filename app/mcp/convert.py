"""Pure conversions between MCP and OpenAI shapes: tool names, tool definitions, tool results.

This is the one module that knows both sides. It does no I/O, so every rule is a table-driven test.
"""

import base64
import copy
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, assert_never

from mcp.types import (
    AudioContent,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    Tool,
)

MAX_NAME_LENGTH = 64  # OpenAI: ^[a-zA-Z0-9_-]{1,64}$
_HASH_LENGTH = 8
_UNSAFE_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


@dataclass(frozen=True)
class ToolRoute:
    """Where an exposed tool name leads: the server's name in mcp.json and the tool's own name there."""

    server: str
    tool: str


@dataclass(frozen=True)
class Catalogue:
    """The MCP tools as the model sees them, converted once whenever a tool list changes."""

    openai_tools: tuple[dict[str, Any], ...] = ()
    routes: Mapping[str, ToolRoute] = field(default_factory=dict)

    def owns(self, name: str) -> bool:
        return name in self.routes

    def route(self, name: str) -> ToolRoute | None:
        return self.routes.get(name)

    def describe(self) -> list[dict[str, Any]]:
        """The injected tools with the server and tool each one maps back to."""
        return [
            {"server": self.routes[tool["function"]["name"]].server,
             "tool": self.routes[tool["function"]["name"]].tool, **tool}
            for tool in self.openai_tools
        ]


@dataclass(frozen=True)
class ToolOutcome:
    """A tool call's result as the content of one `tool` message."""

    content: str
    is_error: bool


def exposed_name(server: str, tool: str) -> str:
    """`{server}__{tool}`, made safe for OpenAI, cut with a stable hash suffix when too long."""
    name = _UNSAFE_NAME_CHARS.sub("_", f"{server}__{tool}")
    return name if len(name) <= MAX_NAME_LENGTH else hashed_name(name, server, tool)


def hashed_name(name: str, server: str, tool: str) -> str:
    """A name that stays distinct for distinct (server, tool) pairs even after cutting or sanitising."""
    digest = hashlib.sha256(f"{server}\x00{tool}".encode()).hexdigest()[:_HASH_LENGTH]
    return f"{name[: MAX_NAME_LENGTH - _HASH_LENGTH - 1]}_{digest}"


def build_catalogue(tools_by_server: Mapping[str, Sequence[Tool]]) -> Catalogue:
    """Converts every server's tools, in config order, into one catalogue with unique names."""
    usable = [
        (server, tool)
        for server, tools in tools_by_server.items()
        for tool in tools
        if not _requires_task(tool)
    ]
    names = [exposed_name(server, tool.name) for server, tool in usable]
    taken: dict[str, int] = {}
    for name in names:
        taken[name] = taken.get(name, 0) + 1
    openai_tools: list[dict[str, Any]] = []
    routes: dict[str, ToolRoute] = {}
    for (server, tool), name in zip(usable, names, strict=True):
        if taken[name] > 1:  # e.g. "a.b" and "a_b" sanitise alike: both get a hash
            name = hashed_name(name, server, tool.name)
        if name in routes:  # a server listing one tool twice: keep the first
            continue
        routes[name] = ToolRoute(server=server, tool=tool.name)
        openai_tools.append(to_openai_tool(name, tool))
    return Catalogue(openai_tools=tuple(openai_tools), routes=routes)


def to_openai_tool(name: str, tool: Tool) -> dict[str, Any]:
    """An OpenAI function tool. `parameters` is always an object schema with `properties`."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": tool.description or tool.title or "",
            "parameters": object_schema(tool.input_schema),
        },
    }


def object_schema(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    parameters = copy.deepcopy(dict(schema or {}))
    parameters["type"] = "object"
    if not isinstance(parameters.get("properties"), dict):
        parameters["properties"] = {}
    return parameters


def outcome_from_result(result: CallToolResult) -> ToolOutcome:
    """Text blocks joined; other blocks described; `isError` marked so the model can tell."""
    parts = [text for block in result.content if (text := _block_text(block))]
    text = "\n".join(parts)
    if not any(isinstance(block, TextContent) for block in result.content) and result.structured_content:
        text = "\n".join([json.dumps(result.structured_content, ensure_ascii=False), *parts])
    if result.is_error:
        return ToolOutcome(f"Error: {text or 'the tool reported an error without a message'}", is_error=True)
    return ToolOutcome(text or "(the tool returned no content)", is_error=False)


def outcome_from_failure(message: str) -> ToolOutcome:
    """A failure on the gateway's side (bad arguments, timeout, server down) told to the model."""
    return ToolOutcome(f"Error: {message}", is_error=True)


def _block_text(block: ContentBlock) -> str:
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent | AudioContent):
        kind = "image" if isinstance(block, ImageContent) else "audio"
        return f"[{kind}: {block.mime_type}, {_decoded_size(block.data)} bytes]"
    if isinstance(block, ResourceLink):
        return f"[resource link: {block.name} <{block.uri}>]"
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        if isinstance(resource, TextResourceContents):
            return resource.text
        return f"[resource {resource.uri}: {resource.mime_type or 'binary'}, {_decoded_size(resource.blob)} bytes]"
    assert_never(block)


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except ValueError:
        return len(data)


def _requires_task(tool: Tool) -> bool:
    # The SDK cannot run MCP tasks, so a tool that only runs as a task would always fail.
    execution = getattr(tool, "execution", None)
    return getattr(execution, "task_support", None) == "required"
