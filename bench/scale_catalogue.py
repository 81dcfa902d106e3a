"""Large tool catalogues made of real ones, for the scale benchmark: the 155 tools of twelve popular MCP servers
(bench/eval/catalogue/, recorded from their releases) repeated as often as needed. Copy 0 keeps the real names;
copy c > 0 has `_{c + 1}` after each name (`search_nodes_2`), with descriptions and schemas as recorded, so a
catalogue of 1,000 tools reads like six sets of real servers, not like generated noise.

Only the standard library: the stdio server that serves these starts fifty times.
"""

import json
from functools import cache
from pathlib import Path
from typing import Any

CATALOGUE = Path(__file__).parent / "eval" / "catalogue"


@cache
def recorded() -> tuple[dict[str, Any], ...]:
    """The recorded tools, in MCP form, the servers in file-name order and each server's tools as it lists them."""
    tools: list[dict[str, Any]] = []
    for path in sorted(CATALOGUE.glob("*.json")):
        if path.stem != "results":  # the eval's canned answers to these tools' calls
            tools.extend(json.loads(path.read_text())["tools"])
    return tuple(tools)


def mcp_tools(count: int, offset: int = 0, tag: str = "") -> list[dict[str, Any]]:
    """Tools `offset` to `offset + count` of the endless catalogue, in MCP form (`tag`, when given, goes after
    every name: a catalogue with other documents, whose ranking index is not cached yet)."""
    real = recorded()
    tools = []
    for number in range(offset, offset + count):
        tool = dict(real[number % len(real)])
        copy = number // len(real)
        tool["name"] = f"{tool['name']}{f'_{copy + 1}' if copy else ''}{f'_{tag}' if tag else ''}"
        tools.append(tool)
    return tools


def openai_tools(count: int, offset: int = 0, tag: str = "") -> list[dict[str, Any]]:
    """The same tools as a chat request offers them (the gateway's own conversion also tidies schemas for the
    upstream's profile; the sizes here are the recorded ones)."""
    return [{"type": "function", "function": {"name": tool["name"], "description": tool.get("description") or "",
                                              "parameters": tool.get("inputSchema") or {"type": "object"}}}
            for tool in mcp_tools(count, offset, tag)]
