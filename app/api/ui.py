"""What the status page reads and does, as JSON and SSE under /ui: the recent tool calls, live changes,
a restart of one server, and a playground that runs a tool the way a model's call runs.

Behind the same key, Host and Origin checks as the API (app/api/guard.py): a web page elsewhere can
neither read these nor post to them.
"""

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import orjson
from fastapi import APIRouter, Request
from sse_starlette import EventSourceResponse

from app.api.deps import PoolDep, RecentCallsDep
from app.errors import InvalidRequest, RouteNotFound
from app.mcp.pool import McpPool
from app.recent_calls import RecentCalls

router = APIRouter(prefix="/ui", include_in_schema=False)
EVENTS_PING_SECONDS = 15


@router.get("/calls")
async def recent_calls(recent: RecentCallsDep, after: int = 0) -> dict[str, Any]:
    """The last tool calls, oldest first; `after`: only those numbered past it."""
    return {"object": "list", "data": recent.entries(after)}


@router.get("/events")
async def events(pool: PoolDep, recent: RecentCallsDep) -> EventSourceResponse:
    """`servers` (every server's status) at once and at each change; `call` for each tool call."""
    return EventSourceResponse(_events(pool, recent), ping=EVENTS_PING_SECONDS)


async def _events(pool: McpPool, recent: RecentCalls) -> AsyncIterator[dict[str, str]]:
    seen = recent.count
    yield {"event": "servers", "data": orjson.dumps(pool.health()).decode()}
    while True:
        async with anyio.create_task_group() as group:  # whichever comes first: a status change or a call
            async def first(wait: Any) -> None:
                await wait()
                group.cancel_scope.cancel()

            group.start_soon(first, pool.next_change)
            group.start_soon(first, recent.next_call)
        for call in recent.entries(seen):
            yield {"event": "call", "data": orjson.dumps(call).decode()}
        seen = recent.count
        yield {"event": "servers", "data": orjson.dumps(pool.health()).decode()}


@router.post("/servers/{name}/restart", status_code=202)
async def restart_server(name: str, pool: PoolDep) -> dict[str, Any]:
    if not pool.restart(name):
        raise RouteNotFound(f"There is no MCP server '{name}' running.", code="server_not_found")
    return {"server": name, "restarting": True}


@router.post("/playground")
async def playground(request: Request, pool: PoolDep) -> dict[str, Any]:
    """Runs one tool by the name the model sees, with the arguments given, through the path a model's call
    takes (argument check, server, envelope, cap), and returns exactly what the model would read."""
    try:
        body = json.loads(await request.body())
    except ValueError as exc:
        raise InvalidRequest("The body is not JSON: send {\"tool\": NAME, \"arguments\": {...}}.") from exc
    if not isinstance(body, dict) or not isinstance(body.get("tool"), str):
        raise InvalidRequest("Name the tool: {\"tool\": NAME, \"arguments\": {...}}.", param="tool")
    arguments = body.get("arguments", {})
    if not isinstance(arguments, dict):
        raise InvalidRequest("arguments must be a JSON object.", param="arguments")
    outcome = await pool.call_tool(body["tool"], json.dumps(arguments))
    return {"tool": body["tool"], "content": outcome.content, "is_error": outcome.is_error,
            "images": len(outcome.images)}
