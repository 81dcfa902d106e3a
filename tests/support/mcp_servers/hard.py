"""A test MCP server made of what breaks gateways: hard schemas, hard names, every kind of result."""

import base64
from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import (
    Annotations,
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from pydantic import BaseModel, Field

server = MCPServer("hard", version="1.0.0")
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)).decode()
WAV = base64.b64encode(b"RIFF" + b"\x00" * 40).decode()
BIG = 100_000


class Address(BaseModel):
    street: str
    postcode: Annotated[str, Field(pattern=r"\d{4,5}")]


class Person(BaseModel):
    name: str
    address: Address
    nickname: str | None = None


class Node(BaseModel):
    label: str
    children: list["Node"] = []


class Level3(BaseModel):
    leaf: int


class Level2(BaseModel):
    level3: Level3


class Level1(BaseModel):
    level2: Level2


class Weather(BaseModel):
    city: str
    temp_c: float


@server.tool()
def register(person: Person, mode: Literal["fast", "careful"] = "careful", limit: int = 10) -> str:
    """Nested $defs and $ref, an optional field, an enum, defaults and an unanchored pattern."""
    return f"registered {person.name} ({mode}, {limit})"


@server.tool()
def plant(tree: Node) -> str:
    """A cyclic $ref: a tree of nodes."""
    return f"planted {tree.label} with {len(tree.children)} children"


@server.tool()
def deep(root: Level1) -> int:
    """A deep object."""
    return root.level2.level3.leaf


@server.tool(name="x" * 100)
def long_name() -> str:
    """A tool whose name is 100 characters long."""
    return "long"


@server.tool(name="weather.current")
def dotted() -> str:
    """A dotted tool name."""
    return "dotted"


@server.tool(name="天气")
def unicode_name() -> str:
    """A tool named in Chinese."""
    return "unicode"


@server.tool()
def json_text() -> TextContent:
    """Returns JSON as text."""
    return TextContent(type="text", text='{"rows": [1, 2, 3]}')


@server.tool()
def image() -> ImageContent:
    """Returns a 1x1 PNG."""
    return ImageContent(type="image", data=PNG, mime_type="image/png")


@server.tool()
def audio() -> AudioContent:
    """Returns a short WAV."""
    return AudioContent(type="audio", data=WAV, mime_type="audio/wav")


@server.tool()
def link() -> ResourceLink:
    """Returns a link to a resource."""
    return ResourceLink(
        type="resource_link", uri="file:///srv/report.pdf", name="report.pdf", mime_type="application/pdf"
    )


@server.tool()
def embedded_text() -> EmbeddedResource:
    """Returns an embedded text resource."""
    return EmbeddedResource(type="resource", resource=TextResourceContents(uri="file:///notes.md", text="# Notes"))


@server.tool()
def embedded_blob() -> EmbeddedResource:
    """Returns an embedded binary resource."""
    blob = BlobResourceContents(uri="file:///a.zip", blob=WAV, mime_type="application/zip")
    return EmbeddedResource(type="resource", resource=blob)


@server.tool()
def structured(city: str) -> Weather:
    """Returns structuredContent."""
    return Weather(city=city, temp_c=21.5)


@server.tool()
def failing(reason: str) -> str:
    """Fails with isError."""
    raise ToolError(f"cannot do that: {reason}")


@server.tool()
def empty() -> list[TextContent]:
    """Returns no content at all."""
    return []


@server.tool()
def for_user_only() -> list[TextContent]:
    """One block for the model and one only for the user."""
    return [
        TextContent(type="text", text="model sees this", annotations=Annotations(audience=["assistant"])),
        TextContent(type="text", text="only the user sees this", annotations=Annotations(audience=["user"])),
    ]


@server.tool()
def large() -> str:
    """Returns a 100,000-character result."""
    return "".join(f"line {i:06d}\n" for i in range(BIG // 12 + 1))[:BIG]


if __name__ == "__main__":
    server.run()
