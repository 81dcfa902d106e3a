"""How tool work is shown to people, and what tool results address to them; and both removed again from the
history clients send back.

The trace: tool activity as reasoning, as Open WebUI tool blocks, as text, or not at all. Pure rendering, no I/O.
`reasoning` streams as `delta.reasoning_content` (Open WebUI and Chatbox fold
it away; SDK clients ignore it). `details` writes Open WebUI's `<details type="tool_calls" ...>` blocks
into the content, in the exact shape its renderer needs, and a plain block of ours for a call that waits for the
person. `markdown` writes one quoted line per call.
The `details` and `markdown` traces come back in the history clients send; `strip_trace` removes them,
and `read_back` recovers the calls a `details` block recorded, so the model can see them again.

What tool results address to the person (`PersonView`), shown in the answer whatever the trace mode and whatever
the model sees: images as markdown images, text meant for the user alone as a quote. And removed again
(`strip_shown`) from the history clients send back, with the lines that link to a server's sign-in
(`offer/missing_servers.py`): user-only text was never meant for the model, and an image costs it tokens.

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
import html
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from app.chat.answer.images import ImageStore, image_type
from app.chat.events import ServersNotReady, ToolProgress, ToolsRan, ToolsStarted, ToolsWaiting
from app.chat.ports import ImagePart, ToolOutput
from app.openai.accumulate import ToolCall
from app.openai.errors import InvalidRequest
from app.openai.wire import JSONValue
from app.settings.vocabularies import TraceMode as TraceMode  # spelled with the settings; streaming reads it here

TRACE_MODES: tuple[TraceMode, ...] = get_args(TraceMode)
SUMMARY_CHARS = 200
DETAILS_RESULT_CHARS = 4000
MARKDOWN_MARK = "> 🔧 "
HEADER = "X-Toolbridge-Trace"  # a request's own trace mode
_DETAILS_OPENING = '<details type="tool_calls"'
# A call that waits for the person: a plain details block, which Open WebUI shows finished and neutral (its tool
# widget spins while a call is not done, and stayed spinning in the chat after the call ran).
_WAITING_MARK = 'data-toolbridge="waiting"'
_OPENINGS = (_DETAILS_OPENING, f"<details {_WAITING_MARK}")
_DETAILS_CLOSING = "</details>"
# Only from a word's first character: tried from every character of a long word with no `=`, it was quadratic.
_ATTRIBUTE = re.compile(r'(?<![\w-])([\w-]+)="([^"]*)"')
_FAILED_PREFIX = "Error: "
_FAILED_STATUS = "failed"
_NOT_DONE = "false"
_NOT_DONE_ATTRIBUTE = f'done="{_NOT_DONE}"'
_MARKDOWN_BLOCK = re.compile(rf"\n?(?:^{re.escape(MARKDOWN_MARK)}.*(?:\n|$))+\n?", re.MULTILINE)


def trace_mode(header: str | None, default: TraceMode) -> TraceMode:
    """The mode a request asks for with X-Toolbridge-Trace, else the configured one."""
    if header is None:
        return default
    mode = header.strip().lower()
    if mode not in TRACE_MODES:
        raise InvalidRequest(
            f"{HEADER} must be one of {', '.join(TRACE_MODES)}; got '{header}'.", param=HEADER
        )
    return mode  # narrowed to TraceMode by the `in TRACE_MODES` check


@dataclass(frozen=True)
class TraceText:
    """Text for one channel of the message: the visible content or the reasoning."""

    channel: Literal["content", "reasoning"]
    text: str


def render_started(mode: TraceMode, calls: Sequence[ToolCall]) -> TraceText | None:
    if mode != "reasoning":
        return None  # the other modes show each call once, finished, so nothing needs replacing
    return TraceText("reasoning", "".join(f"Calling {c.name}({_short(c.arguments)})\n" for c in calls))


def render_finished(
    mode: TraceMode, calls: Sequence[ToolCall], outputs: Sequence[ToolOutput], durations_ms: Sequence[float],
    files: Sequence[Sequence[str]] = (),
) -> TraceText | None:
    """`files`: per call, the images (data: URLs) its details block shows (`PersonView` below)."""
    entries = list(zip(calls, outputs, durations_ms, strict=True))
    if mode == "reasoning":
        lines = [f"{c.name} {_verdict(o)} in {ms:.0f} ms: {summary(o)}\n" for c, o, ms in entries]
        return TraceText("reasoning", "".join(lines))
    if mode == "details":
        shows = list(files) or [()] * len(entries)
        blocks = [_details_block(c, o, ms, f) for (c, o, ms), f in zip(entries, shows, strict=True)]
        return TraceText("content", "".join(blocks))
    if mode == "markdown":
        lines = [f"{MARKDOWN_MARK}`{c.name}` {_short(c.arguments)} → {_verdict(o)}: {summary(o)} ({ms:.0f} ms)\n"
                 for c, o, ms in entries]
        return TraceText("content", "\n" + "".join(lines) + "\n")  # quoted lines must start a line
    return None


def render_progress(
    mode: TraceMode, call: ToolCall, progress: float, total: float | None, message: str | None
) -> TraceText | None:
    """An MCP progress notification from a call still running. With the `details` trace it goes to the reasoning too:
    a tool's block is written once, when it ends (a stream cannot change what it sent), while Open WebUI shows the
    reasoning live as it grows."""
    amount = f"{progress:g}/{total:g}" if total else f"{progress:g}"
    note = f"{message} " if message else ""
    if mode in ("reasoning", "details"):
        return TraceText("reasoning", f"{call.name}: {note}({amount})\n")
    if mode == "markdown":
        return TraceText("content", f"\n{MARKDOWN_MARK}`{call.name}` {note}({amount})\n")
    return None


def render_waiting(mode: TraceMode, calls: Sequence[ToolCall], for_answer: bool = False) -> TraceText | None:
    """Calls that wait for the person's yes (or, `for_answer`, their answer to the server's question); in the
    `details` trace a block of their own, never read back as calls that ran."""
    what = "answer" if for_answer else "approval"
    if mode == "reasoning":
        return TraceText("reasoning", "".join(f"Waiting for your {what}: {c.name}({_short(c.arguments)})\n"
                                              for c in calls))
    if mode == "details":
        return TraceText("content", "".join(_waiting_block(call, what) for call in calls))
    if mode == "markdown":
        lines = [f"{MARKDOWN_MARK}`{c.name}` {_short(c.arguments)} → waiting for your {what}\n" for c in calls]
        return TraceText("content", "\n" + "".join(lines) + "\n")
    return None


def render_not_ready(mode: TraceMode, servers: Sequence[tuple[str, str]]) -> TraceText:
    """MCP servers whose tools are missing from the answer, and why: in every mode, the trace's lines for those
    that show it in the content, else the reasoning (`off` too: the person would otherwise get no word)."""
    lines = [f"MCP server '{' '.join(name.split())}' {why}: its tools are missing from this answer."
             for name, why in servers]
    if mode in ("details", "markdown"):
        return TraceText("content", "\n" + "".join(f"{MARKDOWN_MARK}{line}\n" for line in lines) + "\n")
    return TraceText("reasoning", "".join(f"{line}\n" for line in lines))


def _waiting_block(call: ToolCall, what: str) -> str:
    """The call's name and arguments ride along as data attributes, for programs that read the answer (the eval
    scores a call that waits as the call the model made); Open WebUI shows only the summary and the line."""
    then = "runs if you reply **yes**" if what == "approval" else "goes on with your answer"
    data = f'data-name="{html.escape(call.name)}" data-arguments="{html.escape(call.arguments)}"'
    return (f"\n<details {_WAITING_MARK} {data}>\n<summary>{html.escape(call.name)}: waiting for your {what}"
            f"</summary>\n\nNot run yet: it {then}.\n</details>\n")


def strip_trace(text: str) -> str:
    """An assistant message as the model wrote it: our details blocks, markdown lines and what results showed
    the person removed."""
    without_details = "".join(text[start:end] for start, end in _between(text, _details_blocks(text)))
    stripped = strip_shown(_MARKDOWN_BLOCK.sub("", without_details))
    return stripped.strip("\n") if stripped != text else text


@dataclass(frozen=True)
class RecordedCall:
    """A tool call as its details block recorded it, read back from the history a client sent."""

    id: str
    name: str
    arguments: str
    result: JSONValue  # what the block showed: the data, or the error's message when `failed`
    failed: bool
    cut: bool  # the block held only the first DETAILS_RESULT_CHARS characters of the result


def read_back(text: str) -> list[str | list[RecordedCall]] | None:
    """An assistant message that carries our details blocks, as its text and its rounds of calls in order
    (blocks with only blank lines between them are one round); None when it carries none."""
    parts: list[str | list[RecordedCall]] = []
    position = 0
    for start, end in _details_blocks(text):
        between = text[position:start]
        tag = text[start:text.index(">", start)]
        if _WAITING_MARK in tag or _NOT_DONE_ATTRIBUTE in tag:  # done="false": such a call before this block
            continue  # a call that waited for the person's yes: it had not run, it has no result to give back
        call = _recorded_call(text[start:end])
        if parts and isinstance(parts[-1], list) and not between.strip():
            parts[-1].append(call)
        else:
            parts += [between, [call]]
        position = end
    if not parts:
        return None
    return [*parts, text[position:]]


def _details_blocks(text: str) -> Iterator[tuple[int, int]]:
    """Where our details blocks are (a call's, a waiting call's): an opening tag, up to the first `</details>` after
    it, with a line break before and after when there is one. Linear: a regular expression for this rescanned the
    rest of the text for every opening that was never closed (8,000 of them, 232 KB, took 31 s)."""
    position = 0
    while (opening := text.find("<details ", position)) >= 0:
        if not text.startswith(_OPENINGS, opening):
            position = opening + 1  # another's details block (Open WebUI's reasoning): kept as it is
            continue
        tag_end = text.find(">", opening + len("<details "))
        closing = text.find(_DETAILS_CLOSING, tag_end + 1) if tag_end >= 0 else -1
        if closing < 0:
            return  # no later opening can be closed either: none is closed after this one's end
        start = opening - 1 if opening > position and text[opening - 1] == "\n" else opening
        end = closing + len(_DETAILS_CLOSING)
        end += text.startswith("\n", end)
        yield start, end
        position = end


def _between(text: str, blocks: Iterator[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """The spans of `text` outside these blocks."""
    position = 0
    for start, end in blocks:
        yield position, start
        position = end
    yield position, len(text)


def _recorded_call(block: str) -> RecordedCall:
    opening = block[: block.index(">") + 1]
    attributes = {name: html.unescape(value) for name, value in _ATTRIBUTE.findall(opening)}
    try:
        result: JSONValue = json.loads(attributes.get("result", "null"))
    except ValueError:
        result = attributes.get("result", "")
    cut = isinstance(result, str) and len(result) == DETAILS_RESULT_CHARS + 1 and result.endswith("…")
    labelled = isinstance(result, str) and result.startswith(_FAILED_PREFIX)
    failed = attributes.get("status") == _FAILED_STATUS or (labelled and not cut)  # older blocks: the label alone
    return RecordedCall(
        id=attributes.get("id", ""), name=attributes.get("name", ""), arguments=attributes.get("arguments") or "{}",
        result=result.removeprefix(_FAILED_PREFIX) if failed and labelled and isinstance(result, str) else result,
        failed=failed, cut=cut,
    )


def summary(output: ToolOutput) -> str:
    """A one-line gist of a result: the envelope's data or error message, shortened."""
    return _short(_gist(output))


def _details_block(call: ToolCall, output: ToolOutput, duration_ms: float, files: Sequence[str] = ()) -> str:
    # Open WebUI needs the block at the start of a line, a line break after the opening tag,
    # done="true", and HTML-escaped attributes with no raw line breaks.
    value = _result_value(output)
    # Open WebUI decodes `result` as JSON while it is a string, then shows an object pretty-printed and anything
    # else as text with its line breaks. So text goes as itself (JSON-encoded, a text cut below would show its
    # quotes and `\n`s), an object as JSON (cut, as the text of its JSON).
    result = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(result) > DETAILS_RESULT_CHARS:
        result = result[:DETAILS_RESULT_CHARS] + "…"
    attributes = {
        "type": "tool_calls",
        "done": "true",
        "id": call.id,
        "name": call.name,
        "arguments": call.arguments or "{}",
        "result": result,
        "duration": f"{duration_ms:.0f}",
    }
    if output.is_error:  # Open WebUI 0.12 marks the call failed (red, not its green check), alone or grouped
        attributes["status"] = _FAILED_STATUS
    if files:  # Open WebUI shows these images below the widget, open or closed
        attributes["files"] = json.dumps(list(files))
    rendered = " ".join(f'{key}="{_attribute(value)}"' for key, value in attributes.items())
    summary = "Tool Failed" if output.is_error else "Tool Executed"  # what other renderers of <details> show
    return f"\n<details {rendered}>\n<summary>{summary}</summary>\n</details>\n"


def _attribute(value: str) -> str:
    return html.escape(value, quote=True).replace("\n", "&#10;").replace("\r", "&#13;")


def _result_value(output: ToolOutput, label_errors: bool = True) -> JSONValue:
    """The result as Open WebUI's widget shows it best: the data itself (pretty-printed), or the error."""
    if output.is_error:
        message = output.error_message or output.content
        said = message.lower().startswith("error")  # "Error executing tool x: ..." needs no second "Error: "
        return f"{_FAILED_PREFIX}{message}" if label_errors and not said else message
    return output.data if output.data is not None else output.content


def _gist(output: ToolOutput) -> str:
    value = _result_value(output, label_errors=False)  # the line already says "failed"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _verdict(output: ToolOutput) -> str:
    return "failed" if output.is_error else "ok"


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= SUMMARY_CHARS else flat[: SUMMARY_CHARS - 1] + "…"


# What tool results address to the person.
IMAGE_ALT_MARK = "🖼 "  # starts the alt text of our images: how they are found again in a history
TEXT_MARK = "> 💬 "
NOTE_MARK = "> 🖼 "
SIGN_IN_MARK = "> 🔑 "  # starts the line with a server's sign-in link (offer/missing_servers.py)
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


def trace_texts(
    mode: TraceMode, event: ToolsStarted | ToolProgress | ToolsRan | ToolsWaiting | ServersNotReady,
    person: PersonView | None,
) -> tuple[list[TraceText], str]:
    """What the client is shown of tool work: the trace, and apart (it follows the round's calls, CallsDone) what
    a round's results address to the person, in every trace mode (off included: that turns off the account of
    the work, not its results). Of `ToolsRan`, the calls that finished (a call that came back with its server's
    question is shown waiting)."""
    texts: list[TraceText | None]
    if isinstance(event, ServersNotReady):
        texts = [render_not_ready(mode, event.servers)]
    elif isinstance(event, ToolsStarted):
        texts = [render_started(mode, event.calls)]
    elif isinstance(event, ToolProgress):
        texts = [render_progress(mode, event.call, event.progress, event.total, event.message)]
    elif isinstance(event, ToolsWaiting):
        texts = [render_waiting(mode, event.calls, event.for_answer)]
    else:
        if not event.calls:
            return [], ""
        shown = person.show(event.calls, event.outputs, in_widget=mode == "details") if person else None
        texts = [render_finished(mode, event.calls, event.outputs, event.durations_ms, shown.files if shown else ())]
        return [text for text in texts if text is not None], shown.text if shown else ""
    return [text for text in texts if text is not None], ""
