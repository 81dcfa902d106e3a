"""Which MCP tools a request is offered, as its user chooses: a toolset picked as a virtual model
(`qwen3-8b+clock`), the header `X-Toolbridge-Tools`, or the request's `metadata.toolbridge_tools`.

Toolsets come from TOOLBRIDGE_TOOLSETS (`{"clock": ["time"]}`: server names, or tool names as offered).
`/v1/models` lists `MODEL+TOOLSET` for every upstream model and toolset, so that Open WebUI and Chatbox
users pick one from the model menu; such a request reaches the upstream as `MODEL`. The header and the
metadata take server, tool or toolset names, comma-separated; `-name` leaves one out. Each source
narrows what the others chose.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from app.chat.ports import ToolSelection
from app.openai.errors import InvalidRequest
from app.openai.schemas import rewrite_model_list
from app.openai.wire import JSONObject, JSONValue

HEADER = "X-Toolbridge-Tools"
METADATA_KEY = "toolbridge_tools"
SEPARATOR = "+"

Toolsets = Mapping[str, list[str]]


def split_model(model: str | None, toolsets: Toolsets) -> tuple[str | None, str | None]:
    """The upstream's model and the toolset a virtual model names (None when it names none)."""
    if model and SEPARATOR in model:
        base, _, name = model.rpartition(SEPARATOR)
        if base and name in toolsets:
            return base, name
    return model, None


@dataclass(frozen=True)
class Chosen:
    """The tools a request's user chose, and what the request's upstream gets instead of what they chose them by."""

    selection: ToolSelection
    model: str | None  # the upstream's model: a virtual model's toolset taken off
    metadata: JSONObject | None = None  # the body's metadata less our key, when it had our key (empty: drop it)


def choose_tools(
    model: str | None, metadata: JSONValue, header: str | None, toolsets: Toolsets, known: Callable[[str], bool]
) -> Chosen:
    """The tools its user selected, by a request's model (a virtual one names a toolset), the body's `metadata` and
    the tools header; and its real model and metadata, for the upstream.

    Raises:
        InvalidRequest: the header or the metadata names something that is no server, tool or toolset.
    """
    include: list[frozenset[str]] = []
    exclude: set[str] = set()
    model, toolset = split_model(model, toolsets)
    if toolset is not None:
        include.append(frozenset(toolsets[toolset]))
    chosen = metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
    rest = None
    if isinstance(metadata, dict) and METADATA_KEY in metadata:
        rest = {key: value for key, value in metadata.items() if key != METADATA_KEY}
    if chosen is not None and not isinstance(chosen, str):
        raise InvalidRequest(f"metadata.{METADATA_KEY} must be a string of names, comma-separated.",
                             param=f"metadata.{METADATA_KEY}")
    for source, text in ((HEADER, _as_sent(header)), (f"metadata.{METADATA_KEY}", chosen)):
        if text is not None:
            wanted, unwanted = _names(text, source, toolsets, known)
            if wanted:
                include.append(wanted)
            exclude |= unwanted
    return Chosen(ToolSelection(tuple(include), frozenset(exclude)), model, rest)


def _names(
    text: str, source: str, toolsets: Toolsets, known: Callable[[str], bool]
) -> tuple[frozenset[str], frozenset[str]]:
    wanted: set[str] = set()
    unwanted: set[str] = set()
    unknown: list[str] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name = item.removeprefix("-")
        if not name:
            raise InvalidRequest(f"{source} has a '-' with no name after it: '-name' leaves out the server, tool "
                                 "or toolset of that name.", param=source)
        if name not in toolsets and not known(name):
            unknown.append(name)
        (unwanted if item.startswith("-") else wanted).update(toolsets.get(name, [name]))
    if unknown:
        raise InvalidRequest(
            f"{source} names {', '.join(repr(n) for n in unknown)}, which is no MCP server, tool or toolset "
            "(GET /tools lists the tools and their servers).", param=source,
        )
    return frozenset(wanted), frozenset(unwanted)


def _as_sent(header: str | None) -> str | None:
    """The header as its sender wrote it: HTTP servers read header bytes as Latin-1, so `évil` arrived as
    `Ã©vil`; bytes that are UTF-8 are read as UTF-8."""
    if header is None or header.isascii():
        return header
    try:
        return header.encode("latin-1").decode("utf-8")
    except UnicodeError:  # not UTF-8 (or not bytes at all): shown as it came
        return header


def with_virtual_models(body: bytes, toolsets: Toolsets) -> bytes:
    """An upstream's /models answer with `MODEL+TOOLSET` after each model, one per toolset."""
    if not toolsets:
        return body

    def add(entries: list[JSONValue]) -> list[JSONValue]:
        listed: list[JSONValue] = []
        for entry in entries:
            listed.append(entry)
            model_id, display = (entry.get("id"), entry.get("name")) if isinstance(entry, dict) else (None, None)
            if isinstance(entry, dict) and isinstance(model_id, str):
                for name in toolsets:
                    virtual = {**entry, "id": f"{model_id}{SEPARATOR}{name}"}
                    if isinstance(display, str):  # OpenRouter-style display names, which Chatbox shows
                        virtual["name"] = f"{display} + {name}"
                    listed.append(virtual)
        return listed

    return rewrite_model_list(body, add)
