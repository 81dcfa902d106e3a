"""A server's resources as one tool the model can call: `{server}__read_resource`.

Models cannot use MCP resources directly, and tools return `resource_link`s they could not open. A server
that declares resources gets one extra tool whose description lists what it offers (bounded, with the
URI templates), and which reads a resource by URI or lists the next page. The listing is taken when
the server connects and again when it says its resources changed. Reads go out as `resources/read` on
the call path of any tool (calling.py), so they get the same deadline, retry and result envelope.
"""

from dataclasses import dataclass
from typing import TypedDict

from mcp import Client
from mcp.client.caching import CacheMode
from mcp.types import ListResourcesResult, ReadResourceResult, Resource, ResourceTemplate, Tool, ToolAnnotations

from app.mcp.watching import list_pages
from app.openai.wire import JSONObject

READ_RESOURCE = "read_resource"  # the tool's name before the usual prefix: `{server}__read_resource`
LISTED_AT_MOST = 1000  # resources listed at connect; the description shows a few, `list` pages the rest
DESCRIPTION_CHARS = 990  # within convert.MAX_DESCRIPTION_CHARS, which would cut it at a sentence
_LINE_CHARS = 110
_TEMPLATE_LINE_CHARS = 220  # a template's description says what to fill in

_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {
        "uri": {"type": "string", "description": "The URI of the resource to read, as listed or linked."},
        "list": {"type": "boolean", "description": "true: list the resources (a page) instead of reading one."},
        "cursor": {"type": "string", "description": "With list: the next_cursor of the previous page."},
    },
    "additionalProperties": False,
}


class ListingShown(TypedDict):
    """A server's resources as GET /resources shows them: the SDK's models as JSON."""

    resources: list[JSONObject]
    templates: list[JSONObject]
    more: bool


class ServerResources(ListingShown):
    """One server's entry: its listing, and the tool that reads them (None: not offered)."""

    read_with: str | None


@dataclass(frozen=True)
class ResourceListing:
    """What a server said it offers when last asked: its first resources, its URI templates, and whether
    there were more resources than were listed."""

    resources: tuple[Resource, ...] = ()
    templates: tuple[ResourceTemplate, ...] = ()
    more: bool = False

    def __bool__(self) -> bool:
        return bool(self.resources or self.templates)

    def describe(self) -> ListingShown:
        """For GET /resources."""
        return {
            "resources": [r.model_dump(mode="json", by_alias=True, exclude_none=True) for r in self.resources],
            "templates": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in self.templates],
            "more": self.more,
        }


async def list_resources(client: Client, refresh: bool = False) -> ResourceListing:
    """The server's resources (up to LISTED_AT_MOST) and templates. A server that declares resources but
    lists no templates (many do not implement it) has none."""
    cache_mode: CacheMode = "refresh" if refresh else "use"

    async def resources(cursor: str | None) -> tuple[list[Resource], str | None]:
        page = await client.list_resources(cursor=cursor, cache_mode=cache_mode)
        return page.resources, page.next_cursor

    async def templates(cursor: str | None) -> tuple[list[ResourceTemplate], str | None]:
        page = await client.list_resource_templates(cursor=cursor, cache_mode=cache_mode)
        return page.resource_templates, page.next_cursor

    listed, more = await list_pages(resources, LISTED_AT_MOST)
    listed_templates, _ = await list_pages(templates, LISTED_AT_MOST)
    return ResourceListing(tuple(listed), tuple(listed_templates), more)


def reader_tool(server: str, listing: ResourceListing) -> Tool:
    """The tool that reads this server's resources, described with what it offers."""
    return Tool(name=READ_RESOURCE, description=_description(server, listing), input_schema=_SCHEMA,
                # Idempotent, so a read is retried on the next connection; not marked read-only, which would
                # add "(Read-only.)" after the listing.
                annotations=ToolAnnotations(idempotent_hint=True))


def _description(server: str, listing: ResourceListing) -> str:
    head = (f"Read a resource of MCP server '{server}' (a document, file or record) by its uri, or list them "
            "with list: true. Links to resources in other tools' results are read here too.")
    lines = [head]
    budget = DESCRIPTION_CHARS - len(head) - 1
    if listing.templates:
        templates = [_line(t.uri_template, t.name, t.description, _TEMPLATE_LINE_CHARS) for t in listing.templates]
        shown = _within(["URI templates (fill in the {variables}):", *templates], budget // 2)
        lines += shown
        budget -= sum(len(line) + 1 for line in shown)
        hidden_templates = len(templates) - max(len(shown) - 1, 0)  # less the heading
        if hidden_templates:
            lines.append(f"...and {hidden_templates} more templates.")
            budget -= len(lines[-1]) + 1
    if listing.resources:
        resources = [_line(r.uri, r.name, r.description) for r in listing.resources]
        shown = _within(["Resources:", *resources], budget)
        lines += shown
        hidden = len(resources) - max(len(shown) - 1, 0)
        if hidden or listing.more:
            lines.append(f"...and {hidden}{'+' if listing.more else ''} more: call with list: true to see them.")
    return "\n".join(lines)


def _within(lines: list[str], budget: int) -> list[str]:
    """The first lines that fit in `budget` characters with room for an "...and N more" line after them."""
    kept: list[str] = []
    size = 0
    for line in lines:
        if size + len(line) + 1 > budget - 70:
            break
        kept.append(line)
        size += len(line) + 1
    return kept


def _line(uri: str, name: str, description: str | None, limit: int = _LINE_CHARS) -> str:
    summary = (description or "").strip().splitlines()[0] if (description or "").strip() else ""
    line = f"- {uri} ({name})" + (f": {summary}" if summary and summary != name else "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


async def read_or_list(client: Client, arguments: JSONObject) -> ReadResourceResult | ListResourcesResult:
    """What a call of the reader tool asks the server: one resource, or a page of the list (the arguments checked
    against `_SCHEMA` first: `uri` and `cursor` are text)."""
    if arguments.get("uri"):
        return await client.read_resource(str(arguments["uri"]), cache_mode="bypass")
    cursor = arguments.get("cursor")
    return await client.list_resources(cursor=str(cursor) if cursor else None, cache_mode="bypass")


def wants_something(arguments: JSONObject) -> bool:
    return bool(arguments.get("uri")) or arguments.get("list") is True
