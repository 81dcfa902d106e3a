"""Which MCP tools a request is offered, as its user chooses: a toolset picked as a virtual model
(`qwen3-8b+clock`), the header `X-Toolbridge-Tools`, or the request's `metadata.toolbridge_tools`.

Toolsets come from TOOLBRIDGE_TOOLSETS (`{"clock": ["time"]}`: server names, or tool names as offered).
`/v1/models` lists `MODEL+TOOLSET` for every upstream model and toolset, so that Open WebUI and Chatbox
users pick one from the model menu; such a request reaches the upstream as `MODEL`. The header and the
metadata take server, tool or toolset names, comma-separated; `-name` leaves one out. Each source
narrows what the others chose.
"""

from collections.abc import Callable, Mapping
from typing import Any

from app.chat.ports import ToolSelection
from app.openai.errors import InvalidRequest
from app.openai.schemas import rewrite_model_list

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


def choose_tools(
    body: dict[str, Any], header: str | None, toolsets: Toolsets, known: Callable[[str], bool]
) -> tuple[dict[str, Any], ToolSelection]:
    """The request as the upstream should get it (the real model, our metadata key removed), and the
    tools its user selected.

    Raises:
        InvalidRequest: the header or the metadata names something that is no server, tool or toolset.
    """
    include: list[frozenset[str]] = []
    exclude: set[str] = set()
    model, toolset = split_model(body.get("model"), toolsets)
    if toolset is not None:
        body = {**body, "model": model}
        include.append(frozenset(toolsets[toolset]))
    metadata = body.get("metadata")
    chosen = metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
    if isinstance(metadata, dict) and METADATA_KEY in metadata:
        rest = {key: value for key, value in metadata.items() if key != METADATA_KEY}
        body = {key: value for key, value in body.items() if key != "metadata"} | ({"metadata": rest} if rest else {})
        if not isinstance(chosen, str):
            raise InvalidRequest(f"metadata.{METADATA_KEY} must be a string of names, comma-separated.",
                                 param=f"metadata.{METADATA_KEY}")
    for source, text in ((HEADER, _as_sent(header)), (f"metadata.{METADATA_KEY}", chosen)):
        if text is not None:
            wanted, unwanted = _names(text, source, toolsets, known)
            if wanted:
                include.append(wanted)
            exclude |= unwanted
    return body, ToolSelection(tuple(include), frozenset(exclude))


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

    def add(entries: list[Any]) -> list[Any]:
        listed: list[Any] = []
        for entry in entries:
            listed.append(entry)
            if isinstance(entry, dict) and isinstance(entry.get("id"), str):
                for name in toolsets:
                    virtual = {**entry, "id": f"{entry['id']}{SEPARATOR}{name}"}
                    if isinstance(entry.get("name"), str):  # OpenRouter-style display names, which Chatbox shows
                        virtual["name"] = f"{entry['name']} + {name}"
                    listed.append(virtual)
        return listed

    return rewrite_model_list(body, add)
