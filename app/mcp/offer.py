"""What one MCP server offers, as last listed: its tools, its resources and its prompts.

Listed when the server connects, and again whenever it says a list changed (a 2025-era notification or a
2026-era subscription event). A tool whose definition changes after it was offered is flagged in the log
(a rug pull), and withdrawn under TOOLBRIDGE_BLOCK_CHANGED_TOOLS. The server's supervisor owns the
connection; this owns what the connection offers.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import structlog
from mcp import Client, MCPError
from mcp.types import Prompt, Tool

from app.mcp.config import ServerConfig
from app.mcp.prompts import list_all_prompts
from app.mcp.resources import READ_RESOURCE, ResourceListing, list_resources, reader_tool
from app.mcp.skills import LOAD_SKILL, Skill, skill_tool, skills_of
from app.mcp.tasks import runs_tasks
from app.mcp.trusted import TrustedDefinitions
from app.mcp.watching import ListKind, definition, list_all_tools, listen_for_changes, notified_change

log = structlog.get_logger("toolbridge.mcp")


@dataclass(frozen=True)
class Listing:
    """Everything a server offered when its connection was made."""

    tools: list[Tool]
    resources: ResourceListing | None  # None: the server offers no resources (or failed to list them)
    prompts: tuple[Prompt, ...]
    runs_tasks: bool = False  # it runs tool calls as MCP tasks on a wire the gateway speaks them on (tasks.py)


class ServerOffer:
    def __init__(self, name: str, config: ServerConfig, *, block_changed_tools: bool, resource_tools: bool,
                 changed: Callable[[], None], trusted: TrustedDefinitions | None = None) -> None:
        """`changed` tells the pool to rebuild its catalogue and prompts; `trusted` compares each listing with the
        definitions pinned before it is published."""
        self.name, self.config, self._changed, self._trusted = name, config, changed, trusted
        self._block_changed_tools, self._resource_tools = block_changed_tools, resource_tools
        self.tools: list[Tool] | None = None  # None: nothing to offer (not listed yet, or withdrawn)
        self.resources: ResourceListing | None = None
        self.prompts: tuple[Prompt, ...] = ()
        self.runs_tasks = False
        self._blocked: set[str] = set()  # tools whose definition changed, under TOOLBRIDGE_BLOCK_CHANGED_TOOLS
        self._changes: dict[ListKind, anyio.Event] = {}  # set when the server says a list changed

    def offered(self) -> list[Tool]:
        """The listed tools that mcp.json lets through and that have not been blocked, and the resource
        reader when the server has resources and no tool of that name itself."""
        tools = [t for t in self.tools or [] if t.name not in self._blocked and self.config.offers(t.name)]
        if self.reads_resources:
            assert self.resources is not None
            tools.append(reader_tool(self.name, self.resources))
        if self.loads_skills:
            tools.append(skill_tool(self.name, self.skills))
        return tools

    @property
    def skills(self) -> tuple[Skill, ...]:
        """The server's skills (skills.py), as its resources last listed them."""
        return skills_of(self.resources)

    @property
    def loads_skills(self) -> bool:
        """Whether the gateway offers its `load_skill` tool for this server."""
        return (self.tools is not None and bool(self.skills) and self.config.offers(LOAD_SKILL)
                and all(t.name != LOAD_SKILL for t in self.tools))

    @property
    def reads_resources(self) -> bool:
        """Whether the gateway offers its `read_resource` tool for this server."""
        # Servers built on the SDKs declare resources whether they have any or not: a listing of none gets no tool.
        return (self._resource_tools and bool(self.resources) and self.tools is not None
                and self.config.offers(READ_RESOURCE) and all(t.name != READ_RESOURCE for t in self.tools))

    async def list_everything(self, client: Client) -> Listing:
        """The tools, and the resources and prompts the server declares. What it fails to list besides its
        tools is not offered; its tools still serve.

        Raises: whatever listing the tools raises (the connection is no use without them)."""
        tools = await list_all_tools(client)
        if self._trusted is not None:
            await self._trusted.check(self.name, tools)
        capabilities = client.server_capabilities
        resources: ResourceListing | None = None
        prompts: tuple[Prompt, ...] = ()
        if capabilities.resources is not None:
            try:
                resources = await list_resources(client)
            except MCPError as exc:
                log.warning("mcp_resources_list_failed", server=self.name, error=exc.message)
        if capabilities.prompts is not None:
            try:
                prompts = await list_all_prompts(client)
            except MCPError as exc:
                log.warning("mcp_prompts_list_failed", server=self.name, error=exc.message)
        return Listing(tools, resources, prompts, runs_tasks(client))

    def publish(self, listing: Listing) -> None:
        self.tools, self.resources, self.prompts = listing.tools, listing.resources, listing.prompts
        self.runs_tasks = listing.runs_tasks
        self._changed()

    def withdraw(self, announce: bool = True) -> None:
        """Nothing offered any more (a stopped server); `announce=False` when the pool rebuilds anyway."""
        self.tools, self.resources, self.prompts = None, None, ()
        if announce:
            self._changed()

    def notified(self, message: Any) -> bool:
        """Takes a 2025-era notification that a list changed; False for any other message."""
        kind = notified_change(message)
        if kind is not None:
            self._change(kind).set()
        return kind is not None

    async def follow(self, client: Client, lost: Callable[[], None]) -> None:
        """Re-lists tools, resources and prompts whenever the server says they changed, on either era.
        `lost`: the 2026 subscription ended, which means the connection is gone."""
        capabilities = client.server_capabilities
        kinds: set[ListKind] = {"tools"}
        if capabilities.resources is not None:
            kinds.add("resources")
        if capabilities.prompts is not None:
            kinds.add("prompts")
        async with anyio.create_task_group() as group:
            group.start_soon(listen_for_changes, self.name, client, lambda kind: self._change(kind).set(), lost,
                             frozenset(kinds))
            for kind in kinds:
                group.start_soon(self._relist_on_change, client, kind)

    def _change(self, kind: ListKind) -> anyio.Event:
        """The event a change of this list sets; replaced after each relisting."""
        if kind not in self._changes:
            self._changes[kind] = anyio.Event()
        return self._changes[kind]

    async def _relist_on_change(self, client: Client, kind: ListKind) -> None:
        while True:
            await self._change(kind).wait()
            self._changes[kind] = anyio.Event()
            try:
                if kind == "tools":
                    tools = await list_all_tools(client, refresh=True)
                    if self._trusted is not None:
                        await self._trusted.check(self.name, tools)
                    # Off the event loop: two definitions a tool took 50-90 ms at 1,000 tools.
                    before, after = await anyio.to_thread.run_sync(_definitions, self.tools or [], tools)
                    self._republish(tools, before, after)
                    continue
                if kind == "resources":
                    self.resources = await list_resources(client, refresh=True)
                else:
                    self.prompts = await list_all_prompts(client, refresh=True)
            except (MCPError, anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
                log.warning("mcp_list_refresh_failed", server=self.name, list=kind, error=str(exc))
                continue
            log.info("mcp_list_changed", server=self.name, list=kind)
            self._changed()

    def _republish(self, tools: list[Tool], before: dict[str, str], after: dict[str, str]) -> None:
        """Swaps in a changed tool list; a changed definition of a known tool is flagged (rug pull). `before`,
        `after`: each tool's definition, by name, in the list offered and in `tools`."""
        added, removed = sorted(after.keys() - before.keys()), sorted(before.keys() - after.keys())
        changed = sorted(n for n in after.keys() & before.keys() if after[n] != before[n])
        if changed:
            log.warning("mcp_tool_definition_changed", server=self.name, tools=changed,
                        blocked=self._block_changed_tools, note="a server changed a tool it had offered before")
            if self._block_changed_tools:
                self._blocked.update(changed)
        if added or removed or changed:
            log.info("mcp_tools_changed", server=self.name, added=added, removed=removed, changed=changed)
        self.tools = tools
        self._changed()


def _definitions(*listings: list[Tool]) -> tuple[dict[str, str], ...]:
    return tuple({tool.name: definition(tool) for tool in tools} for tools in listings)
