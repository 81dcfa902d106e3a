"""Pinned tool definitions (issue 48): each tool's definition (its description, input schema, annotations and title)
is kept when the gateway first sees it (trust on first use), in the token vault, so a restart and every replica
compare against the same one. A server whose definition of a tool later differs (at a restart, or through
`tools/list_changed`: a "rug pull", postmark-mcp's silent BCC) has that tool marked changed, with a diff: the tool
then asks the person before every call, whatever their grants, until an operator accepts the new definition on the
status page (or TOOLBRIDGE_PIN_TOOLS=false turns all of this off).

The check runs where a listing arrives (offer.py), before it is published, so the catalogue never offers a changed
tool unmarked. A vault that cannot be read or written leaves the definitions as first seen by this process.
"""

import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import anyio.to_thread
import structlog
from mcp.types import Tool

from app.state import StateStoreError, Vault

log = structlog.get_logger("toolbridge.mcp")

HOLD_SECONDS = 5.0
MAX_DIFF_LINES = 60


def pinned_text(tool: Tool) -> str:
    """What is pinned of a tool, one key a line so a change reads as a diff."""
    kept = tool.model_dump(mode="json", by_alias=True, exclude_none=True,
                           include={"title", "description", "input_schema", "annotations"})
    return json.dumps(kept, indent=2, sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True)
class Change:
    """A tool whose server now defines it otherwise than when it was pinned."""

    server: str
    tool: str  # the server's own name
    pinned: str
    now: str

    @property
    def diff(self) -> str:
        lines = list(difflib.unified_diff(self.pinned.splitlines(), self.now.splitlines(), "pinned", "now",
                                          lineterm="", n=1))
        shown = lines[:MAX_DIFF_LINES]
        if len(lines) > MAX_DIFF_LINES:
            shown.append(f"... ({len(lines) - MAX_DIFF_LINES} more lines)")
        return "\n".join(shown)


class TrustedDefinitions:
    """Every server's pinned definitions, and the tools whose definitions changed since."""

    def __init__(self, vault: Vault | None) -> None:
        self._vault = vault
        self._pinned: dict[str, dict[str, str]] = {}  # server -> tool -> pinned text
        self._current: dict[str, dict[str, str]] = {}  # server -> tool -> text as last listed
        self._loaded: set[str] = set()

    async def check(self, server: str, tools: Iterable[Tool]) -> None:
        """A server's listing: tools seen for the first time are pinned; the others compared with their pins."""
        # In a worker thread: a dump of each tool takes about as long as the offer's own (50-90 ms at 1,000 tools).
        current = await anyio.to_thread.run_sync(lambda: {tool.name: pinned_text(tool) for tool in tools})
        self._current[server] = current
        await self._load(server)
        pinned = self._pinned.setdefault(server, {})
        new = {name: text for name, text in current.items() if name not in pinned}
        if new:
            pinned.update(new)
            await self._save(server, new)
        changed = sorted(name for name, text in current.items() if pinned[name] != text)
        if changed:
            log.warning("mcp_tool_definition_not_as_pinned", server=server, tools=changed,
                        consequence="each asks the person before every call until accepted on the status page")

    def change(self, server: str, tool: str) -> Change | None:
        """How the tool's definition differs from its pin; None when it does not (or is not listed)."""
        now = self._current.get(server, {}).get(tool)
        pinned = self._pinned.get(server, {}).get(tool)
        if now is None or pinned is None or now == pinned:
            return None
        return Change(server, tool, pinned, now)

    def changes(self) -> list[Change]:
        return [change for server, tools in self._current.items() for tool in sorted(tools)
                if (change := self.change(server, tool)) is not None]

    def changed_names(self) -> dict[str, set[str]]:
        """By server, the tools whose definitions changed (what a catalogue build reads)."""
        found: dict[str, set[str]] = {}
        for change in self.changes():
            found.setdefault(change.server, set()).add(change.tool)
        return found

    async def accept(self, server: str, tool: str) -> bool:
        """The tool's definition as now listed becomes its pin; False when it had not changed."""
        change = self.change(server, tool)
        if change is None:
            return False
        self._pinned[server][tool] = change.now
        await self._save(server, {tool: change.now}, replace=True)
        log.info("mcp_tool_definition_accepted", server=server, tool=tool)
        return True

    async def _load(self, server: str) -> None:
        if server in self._loaded or self._vault is None:
            return
        try:
            record = await self._vault.get(_name(server))
        except StateStoreError as exc:
            log.warning("pinned_definitions_unavailable", server=server, error=str(exc),
                        consequence="this process compares with the definitions it saw first")
            return
        self._loaded.add(server)
        stored = record.get("tools") if record is not None else None
        if isinstance(stored, Mapping):
            self._pinned.setdefault(server, {}).update({str(k): v for k, v in stored.items() if isinstance(v, str)})

    async def _save(self, server: str, pins: Mapping[str, str], replace: bool = False) -> None:
        """Adds `pins` to the server's record (a pin already there stays, unless `replace`: another replica may
        have pinned the tool first, and the first pin is the one trusted)."""
        if self._vault is None:
            return
        name = _name(server)
        try:
            async with self._vault.holding(name, HOLD_SECONDS):
                record = await self._vault.get(name)
                listed = record.get("tools") if record is not None else None
                stored = dict(listed) if isinstance(listed, dict) else {}
                for tool, text in pins.items():
                    if replace or tool not in stored:
                        stored[tool] = text
                await self._vault.put(name, {"tools": stored})
                self._pinned[server].update({tool: text for tool, text in stored.items() if isinstance(text, str)})
        except StateStoreError as exc:
            log.warning("pinned_definitions_unavailable", server=server, error=str(exc),
                        consequence="the pins are kept by this process only until it restarts")


def _name(server: str) -> str:
    return f"pinned-tools/{server}"
