"""What tool results address to the person, shown in the answer whatever the trace mode and whatever the
model sees: images as markdown images, text meant for the user alone as a quote. And removed again from the
history clients send back, with the lines that link to a server's sign-in (`sign_in_notice.py`): user-only
text was never meant for the model, and an image costs it tokens.

Images are served from the gateway (`images.py`) rather than written in as data: URLs: Chatbox's URL
sanitiser, and react-markdown's default one, turn a data: image into nothing. Open WebUI's tool widget is the
other way round: it shows a data: URL or one of its own files, and puts its logo in place of any other URL
(`safeImageUrl`). So in the details trace a small image goes into the widget's `files` as a data: URL, which
also lasts as long as the chat does, and a larger one follows the block as a markdown image.

Pure but for the image store; one `PersonView` per request, since the image URL depends on how the person's
browser reaches the gateway.
"""

import base64
import binascii
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.chat.answer.images import ImageStore, image_type
from app.chat.ports import ImagePart, ToolOutput
from app.openai.accumulate import ToolCall

IMAGE_ALT_MARK = "🖼 "  # starts the alt text of our images: how they are found again in a history
TEXT_MARK = "> 💬 "
NOTE_MARK = "> 🖼 "
SIGN_IN_MARK = "> 🔑 "  # starts the line with a server's sign-in link (sign_in_notice.py)
ROUTE = "images/"  # under the gateway's base URL


@dataclass(frozen=True)
class Shown:
    """A round's results as the person sees them: text for the answer, and per call the data: URLs that
    Open WebUI's widget shows (details trace only)."""

    text: str
    files: list[list[str]]


@dataclass(frozen=True)
class PersonView:
    """How one request shows the person what its tool results address to them."""

    store: ImageStore
    base_url: Callable[[], str]  # where the person's browser reaches the gateway; asked once an image is linked
    inline_bytes: int  # the largest image that goes into Open WebUI's widget as a data: URL

    def show(self, calls: Sequence[ToolCall], outputs: Sequence[ToolOutput], *, in_widget: bool) -> Shown:
        """`in_widget`: the calls are shown as Open WebUI's widgets, whose `files` can hold small images."""
        parts: list[str] = []
        files: list[list[str]] = []
        for call, output in zip(calls, outputs, strict=True):
            own: list[str] = []
            for item in output.shown:
                if isinstance(item, str):
                    parts.append(_quote(item))
                else:
                    parts += self._image(call.name, item, own if in_widget else None)
            files.append(own)
        text = "\n\n" + "\n\n".join(parts) + "\n\n" if parts else ""
        return Shown(text, files)

    def _image(self, tool: str, image: ImagePart, widget: list[str] | None) -> list[str]:
        """The markdown that shows the image (or says why it is not shown); nothing when it went to `widget`."""
        try:
            data = base64.b64decode(image.data, validate=False)
        except (binascii.Error, ValueError):
            data = b""
        mime_type = image_type(data)
        if mime_type is None:
            claimed = "".join(c for c in image.mime_type[:60] if c.isprintable()) or "unknown"
            return [f"{NOTE_MARK}{_plain(tool)} returned an image this gateway does not show (type {claimed})."]
        if widget is not None and len(data) <= self.inline_bytes:
            widget.append(f"data:{mime_type};base64,{base64.b64encode(data).decode()}")
            return []
        image_id = self.store.put(data, mime_type)
        if image_id is None:
            return [f"{NOTE_MARK}{_plain(tool)} returned an image too large to show here ({len(data):,} bytes; the "
                    f"most is {self.store.max_image_bytes:,})."]
        return [f"![{IMAGE_ALT_MARK}{_plain(tool)}]({self.base_url().rstrip('/')}/{ROUTE}{image_id})"]


def strip_shown(text: str) -> str:
    """The text without what `PersonView.show` wrote into it (and the sign-in links), and without the blank
    lines around that. Line by line, in one pass: a history may be megabytes."""
    if IMAGE_ALT_MARK not in text and TEXT_MARK not in text and SIGN_IN_MARK not in text:
        return text
    kept: list[str] = []
    removed = quoting = after_ours = gap = False
    for line in text.split("\n"):
        if quoting and line.startswith(">"):
            continue  # the rest of a quote we wrote
        quoting = False
        if _is_ours(line):
            removed, quoting, after_ours = True, line.startswith(TEXT_MARK), True
            while kept and not kept[-1].strip():
                kept.pop()
            gap = bool(kept)  # the text before and after stay apart by one blank line
            continue
        if after_ours and not line.strip():
            continue
        after_ours = False
        if gap:
            kept.append("")
            gap = False
        kept.append(line)
    return "\n".join(kept) if removed else text


def _is_ours(line: str) -> bool:
    if line.startswith((TEXT_MARK, NOTE_MARK, SIGN_IN_MARK)):
        return True
    return line.startswith(f"![{IMAGE_ALT_MARK}") and "](" in line and line.rstrip().endswith(")")


def _quote(text: str) -> str:
    """Text meant for the user, as a quote: each line marked, so that the quote is found again whole. A
    `<details` in it is escaped: it must never read back as a tool call the model made."""
    lines = text.replace("<details", "&lt;details").split("\n")
    return "\n".join([f"{TEXT_MARK}{lines[0]}".rstrip(), *(f"> {line}".rstrip() for line in lines[1:])])


def _plain(name: str) -> str:
    """A tool name safe inside markdown's brackets and on one line."""
    return "".join(c for c in name if c.isprintable() and c not in "[]()")[:64]
