"""A test MCP server whose results address the person: images of any size, images that are not what they say,
and text meant for the user alone.

Run: `python pictures.py` (stdio).
"""

import base64
import random
import struct
import zlib
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import Annotations, ImageContent, TextContent
from pydantic import Field

server = MCPServer("pictures", version="1.0.0")
SVG = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(document.domain)</script></svg>'
HTML = b"<html><body><script>alert(document.domain)</script></body></html>"


def noise_png(kilobytes: int, seed: int = 7) -> bytes:
    """A valid RGB PNG of random pixels (they do not compress) of about `kilobytes` KB."""
    side = max(1, int((kilobytes * 1024 / 3) ** 0.5))
    pixels = random.Random(seed).randbytes(side * side * 3)
    rows = b"".join(b"\x00" + pixels[row * side * 3:(row + 1) * side * 3] for row in range(side))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 0)) + chunk(b"IEND", b"")


def _image(data: bytes, mime_type: str, audience: list | None = None) -> ImageContent:
    annotations = Annotations(audience=audience) if audience else None
    return ImageContent(type="image", data=base64.b64encode(data).decode(), mime_type=mime_type,
                        annotations=annotations)


@server.tool()
def picture(kilobytes: Annotated[int, Field(ge=1, le=20_000)] = 40, seed: int = 7) -> list[ImageContent | TextContent]:
    """A picture of noise, about this many KB, and a line about it."""
    return [TextContent(type="text", text=f"a noise picture of about {kilobytes} KB"),
            _image(noise_png(kilobytes, seed), "image/png")]


@server.tool()
def svg() -> ImageContent:
    """An SVG image with a script in it."""
    return _image(SVG, "image/svg+xml")


@server.tool()
def disguised() -> ImageContent:
    """An HTML page that says it is a PNG."""
    return _image(HTML, "image/png")


@server.tool()
def for_you() -> list[ImageContent | TextContent]:
    """A line for the model, a note for the user alone (markdown, two lines), and a picture for the user alone."""
    return [
        TextContent(type="text", text="the model reads this", annotations=Annotations(audience=["assistant"])),
        TextContent(type="text", text="**Saved.**\nYour report is ready.", annotations=Annotations(audience=["user"])),
        _image(noise_png(2, seed=3), "image/png", audience=["user"]),
    ]


if __name__ == "__main__":
    server.run()
