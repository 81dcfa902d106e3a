"""Records the tool lists of popular MCP servers into bench/eval/catalogue/, once, for the eval's category at scale.

The eval runs offline: bench/eval/catalogue_server.py serves these lists as recorded and answers their calls with
canned results. This script is how they were made, and how to make them again after a server's new release:

    mkdir /tmp/catalogue && cd /tmp/catalogue && npm install PACKAGE@VERSION ...   (the versions below)
    .venv/bin/python -m bench.eval.record_catalogue /tmp/catalogue

Each server is started over stdio as its README says, with placeholder keys where it wants one to start (none of
them calls its service to list its tools), and asked for every page of `tools/list`.
"""

import json
import sys
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

CATALOGUE = Path(__file__).parent / "catalogue"
PLACEHOLDER = "recorded-offline-placeholder"
# name -> (npm package and version, the command's arguments after `node BIN`, environment)
SERVERS: dict[str, tuple[str, list[str], dict[str, str]]] = {
    "memory": ("@modelcontextprotocol/server-memory@2026.8.31", [], {}),
    "sequential-thinking": ("@modelcontextprotocol/server-sequential-thinking@2026.8.31", [], {}),
    "playwright": ("@playwright/mcp@0.0.83", [], {}),
    "context7": ("@upstash/context7-mcp@4.1.1", [], {}),
    "notion": ("@notionhq/notion-mcp-server@2.5.2", [], {"NOTION_TOKEN": PLACEHOLDER}),
    "kubernetes": ("mcp-server-kubernetes@4.1.7", [], {}),
    "firecrawl": ("firecrawl-mcp@3.26.0", [], {"FIRECRAWL_API_KEY": PLACEHOLDER}),
    "github": ("@modelcontextprotocol/server-github@2025.4.8", [], {"GITHUB_PERSONAL_ACCESS_TOKEN": PLACEHOLDER}),
    "tavily": ("tavily-mcp@0.2.22", [], {"TAVILY_API_KEY": PLACEHOLDER}),
    "postgres": ("@modelcontextprotocol/server-postgres@0.6.2", ["postgresql://localhost/shop"], {}),
    "brave-search": ("@brave/brave-search-mcp-server@2.1.4", [], {"BRAVE_API_KEY": PLACEHOLDER}),
}


def binary(folder: Path, package: str) -> Path:
    """The package's own executable, as npx would run it."""
    name = package.rsplit("@", 1)[0]
    manifest = json.loads((folder / "node_modules" / name / "package.json").read_text())
    bins = manifest["bin"]
    relative = bins if isinstance(bins, str) else next(iter(bins.values()))
    return folder / "node_modules" / name / relative


async def record(name: str, params: StdioServerParameters) -> dict:
    async with Client(params, read_timeout_seconds=60) as client:
        tools, cursor = [], None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools.extend(tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in page.tools)
            if (cursor := page.next_cursor) is None:
                break
        info = client.server_info.model_dump(by_alias=True, mode="json", exclude_none=True)
        return {"server": name, "serverInfo": info, "instructions": client.instructions, "tools": tools}


async def main(folder: Path) -> None:
    CATALOGUE.mkdir(exist_ok=True)
    base_env = {"PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(folder)}
    for name, (package, args, env) in SERVERS.items():
        params = StdioServerParameters(command="node", args=[str(binary(folder, package)), *args],
                                       env=base_env | env, cwd=str(folder))
        recorded = await record(name, params) | {"package": package}
        (CATALOGUE / f"{name}.json").write_text(json.dumps(recorded, indent=1, ensure_ascii=False) + "\n")
        print(f"{name}: {len(recorded['tools'])} tools")
    # mcp-server-time is a Python package (a dependency of the eval already)
    params = StdioServerParameters(command="mcp-server-time", args=["--local-timezone", "UTC"])
    recorded = await record("time", params) | {"package": "mcp-server-time (PyPI)"}
    (CATALOGUE / "time.json").write_text(json.dumps(recorded, indent=1, ensure_ascii=False) + "\n")
    print(f"time: {len(recorded['tools'])} tools")


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]))
