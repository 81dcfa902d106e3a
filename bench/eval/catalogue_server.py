"""One recorded MCP server of the eval's category at scale, served offline.

Run: `python bench/eval/catalogue_server.py NAME` (stdio).

It serves bench/eval/catalogue/NAME.json (recorded by bench/eval/record_catalogue.py) over stdio exactly as
recorded: the server's name, version and instructions, and every tool with its name, title, description, schemas,
annotations and `_meta`, through the SDK's low-level server so nothing is rewritten. Calls are answered from
bench/eval/catalogue/results.json, keyed "server/tool": a canned result in the shape the real server returns (a
JSON value is sent as JSON text, and as structuredContent when the tool declares an outputSchema), or a list of
cases `{"when": WORD, "result": ...}` picked by a word found in the call's arguments (the last case, without
"when", is the default). A tool without a canned result answers with a short success text naming what was done;
one with an outputSchema gets the smallest value its schema accepts, so the client's validation passes.
"""

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

CATALOGUE = Path(__file__).parent / "catalogue"
RESULTS = CATALOGUE / "results.json"


def load(name: str) -> dict[str, Any]:
    """The recorded server NAME (bench/eval/catalogue/NAME.json)."""
    recorded: dict[str, Any] = json.loads((CATALOGUE / f"{name}.json").read_text(encoding="utf-8"))
    return recorded


def canned_results() -> dict[str, Any]:
    """Every canned result, keyed "server/tool" (bench/eval/catalogue/results.json)."""
    results: dict[str, Any] = json.loads(RESULTS.read_text(encoding="utf-8"))
    return results


def pick(entry: Any, arguments: dict[str, Any]) -> Any:
    """The canned result for these arguments: an entry that is a list of cases picks the first whose word is in
    the arguments (their JSON, lower-cased), else the case without a word."""
    if not (isinstance(entry, list) and entry and all(isinstance(c, dict) and "result" in c for c in entry)):
        return entry
    said = json.dumps(arguments, ensure_ascii=False).lower()
    for case in entry:
        if "when" not in case or str(case["when"]).lower() in said:
            return case["result"]
    return entry[-1]["result"]


def smallest(schema: Any, defs: dict[str, Any] | None = None) -> Any:
    """The smallest value `schema` accepts: an object with its required properties only, an empty array, the
    first of a choice, a constant or enum's first value, zero, false or an empty string."""
    if not isinstance(schema, dict):
        return None
    defs = defs if defs is not None else {**schema.get("$defs", {}), **schema.get("definitions", {})}
    if "$ref" in schema:
        return smallest(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for choice in ("anyOf", "oneOf"):
        if choice in schema:
            return smallest(schema[choice][0], defs)
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        return {key: smallest(properties.get(key, {}), defs) for key in schema.get("required", [])}
    empty: dict[Any, Any] = {"array": [], "string": "", "integer": 0, "number": 0, "boolean": False, "null": None}
    return empty.get(kind)


def answer(server: str, tool: dict[str, Any], arguments: dict[str, Any],
           results: dict[str, Any]) -> types.CallToolResult:
    """The call's canned result, or a generic success."""
    name = tool["name"]
    schema = tool.get("outputSchema")
    key = f"{server}/{name}"
    if key in results:
        value = pick(results[key], arguments)
    else:
        said = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items()) or "no arguments"
        done = f"{name} done ({said})."
        if schema is None:
            return types.CallToolResult(content=[types.TextContent(type="text", text=done)])
        value = smallest(schema)
        return types.CallToolResult(content=[types.TextContent(type="text", text=done)], structured_content=value)
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
    structured = value if schema is not None and isinstance(value, dict) else None
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=structured)


def build(name: str) -> Server[Any]:
    """The low-level server for the recorded server NAME."""
    recorded = load(name)
    tools = [types.Tool.model_validate(tool) for tool in recorded["tools"]]
    by_name = {tool["name"]: tool for tool in recorded["tools"]}
    results = canned_results()
    info = recorded["serverInfo"]

    async def list_tools(_ctx: Any, _params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = by_name.get(params.name)
        if tool is None:
            return types.CallToolResult(content=[types.TextContent(type="text", text=f"Unknown tool: {params.name}")],
                                        is_error=True)
        return answer(recorded["server"], tool, dict(params.arguments or {}), results)

    icons = [types.Icon.model_validate(icon) for icon in info["icons"]] if "icons" in info else None
    return Server(info["name"], version=info.get("version", ""), title=info.get("title"),
                  description=info.get("description"), website_url=info.get("websiteUrl"), icons=icons,
                  instructions=recorded.get("instructions"), on_list_tools=list_tools, on_call_tool=call_tool)


async def serve(name: str) -> None:
    server = build(name)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(serve, sys.argv[1])
