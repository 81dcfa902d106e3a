"""The status page at `/` (app/ui/: one HTML file, its script and its style, shipped in the package, no
CDN), and what it reads and does under /ui: the recent tool calls and requests, live changes (SSE), a restart of one
server, a playground that runs a tool the way a model's call runs, and the calls waiting for the person's yes,
which the page may approve or deny (only the caller's own: a round asked under another key is not found).
A key limited to some servers (the keys file) sees, restarts and runs only those, and its own calls and requests.

Behind the same key, Host and Origin checks as the API (app/api/guard.py): a web page elsewhere can
neither read these nor post to them; every POST must be declared JSON (the restart too, without a body), which
a browser sends to another origin only after asking it (CORS), and a sandboxed frame (`Origin: null`) may
only read. A browser sends the key as HTTP Basic credentials (any user name,
the key as password), which it asks for once and then sends with every request of the page.
"""

import json
from collections.abc import AsyncIterator, Callable
from functools import lru_cache, partial
from importlib import resources
from typing import Any

import orjson
from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from sse_starlette import EventSourceResponse

from app.access import KeyScope
from app.api.chat_body import parse_json
from app.api.deps import (
    AuthorisedDep,
    KeyScopeDep,
    KeysDep,
    MemoryDep,
    OwnerDep,
    RecentCallsDep,
    RecentRequestsDep,
    SettingsDep,
    UpstreamDep,
    ViewDep,
)
from app.api.doors import read_body
from app.api.health import health_report
from app.chat import Grant, MemoryStores
from app.mcp import KeyView, PromptFailed, TaskEntry, first_of
from app.openai.errors import Conflict, Forbidden, InvalidRequest, Overloaded, RouteNotFound
from app.openai.wire import JSONValue
from app.ops.recent_calls import RecentCalls
from app.ops.recent_requests import RecentRequests
from app.ops.waiting_rounds import VERDICT_VALUES, VERDICTS, Verdict, WaitingRound, verdict_key
from app.state import StateStoreError

router = APIRouter(prefix="/ui", include_in_schema=False)
page_router = APIRouter(include_in_schema=False)
EVENTS_PING_SECONDS = 15
# Nothing but the gateway itself: no CDN, no inline script, no frame around it.
_PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
    "Referrer-Policy": "no-referrer",
}


@lru_cache
def _asset(name: str) -> bytes:
    return resources.files("app.ui").joinpath(name).read_bytes()


@page_router.get("/")
async def page() -> Response:
    return Response(_asset("index.html"), media_type="text/html; charset=utf-8", headers=_PAGE_HEADERS)


@router.get("/page.js")
async def script() -> Response:
    return Response(_asset("page.js"), media_type="text/javascript", headers=_PAGE_HEADERS)


@router.get("/page.css")
async def style() -> Response:
    return Response(_asset("page.css"), media_type="text/css", headers=_PAGE_HEADERS)


@router.get("/health")
async def health(pool: ViewDep, upstream: UpstreamDep, authorised: AuthorisedDep, settings: SettingsDep,
                 memory: MemoryDep, keys: KeysDep) -> dict[str, Any]:
    """What /health says to a caller with the key (the page cannot send a bearer key by itself)."""
    return await health_report(pool, upstream, settings, authorised, memory, keys)


@router.get("/tools")
async def tools(pool: ViewDep) -> dict[str, Any]:
    """Every MCP tool as the model sees it, with the server's own description and schema (as /tools)."""
    return {"object": "list", "data": pool.catalogue.describe()}


@router.get("/calls")
async def recent_calls(recent: RecentCallsDep, scope: KeyScopeDep, after: int = 0) -> dict[str, Any]:
    """The last tool calls, oldest first; `after`: only those numbered past it. A limited key's own alone."""
    return {"object": "list", "data": recent.entries(after, scope)}


@router.get("/requests")
async def recent_requests(recent: RecentRequestsDep, scope: KeyScopeDep, after: int = 0) -> dict[str, Any]:
    """The last chat requests' tool offers, oldest first: tools offered and withheld, and why. A limited key's
    own alone."""
    return {"object": "list", "data": recent.entries(after, scope)}


@router.get("/events")
async def events(pool: ViewDep, recent: RecentCallsDep, requests: RecentRequestsDep,
                 keys: KeysDep) -> EventSourceResponse:
    """`servers` (every server's status) at once and at each change; `call` for each tool call; `request` for
    each chat request's tool offer."""
    current = partial(keys.now, pool.scope)
    return EventSourceResponse(_events(pool, recent, requests, current), ping=EVENTS_PING_SECONDS)


async def _events(pool: KeyView, recent: RecentCalls, requests: RecentRequests,
                  current: Callable[[], KeyScope | None]) -> AsyncIterator[dict[str, str]]:
    """What the key may see: its servers, and a limited key's own calls and requests; as the keys file says
    now (`current`): the stream ends once the key is taken out."""
    seen, seen_requests = recent.count, requests.count
    yield {"event": "servers", "data": orjson.dumps(pool.health()).decode()}
    while True:
        await first_of(pool.next_change, recent.next_call, requests.next_request)
        if (scope := current()) is None:
            return
        pool = KeyView(pool.pool, scope)
        for request in requests.entries(seen_requests, pool.scope):
            yield {"event": "request", "data": orjson.dumps(request).decode()}
        seen_requests = requests.count
        for call in recent.entries(seen, pool.scope):
            yield {"event": "call", "data": orjson.dumps(call).decode()}
        seen = recent.count
        yield {"event": "servers", "data": orjson.dumps(pool.health()).decode()}


@router.post("/servers/{name}/restart", status_code=202)
async def restart_server(name: str, pool: ViewDep) -> dict[str, Any]:
    if not pool.restart(name):
        raise RouteNotFound(f"There is no MCP server '{name}' running.", code="server_not_found")
    return {"server": name, "restarting": True}


@router.post("/playground")
async def playground(request: Request, pool: ViewDep) -> dict[str, Any]:
    """Runs one tool by the name the model sees, with the arguments given, through the path a model's call
    takes (argument check, server, envelope, cap), and returns exactly what the model would read."""
    body = await _json(request, '{"tool": NAME, "arguments": {...}}')
    tool = body.get("tool") if isinstance(body, dict) else None
    if not isinstance(body, dict) or not isinstance(tool, str):
        raise InvalidRequest("Name the tool: {\"tool\": NAME, \"arguments\": {...}}.", param="tool")
    arguments = body.get("arguments", {})
    if not isinstance(arguments, dict):
        raise InvalidRequest("arguments must be a JSON object.", param="arguments")
    outcome = await pool.call_tool(tool, json.dumps(arguments))
    return {"tool": tool, "content": outcome.content, "is_error": outcome.is_error,
            "images": len(outcome.images)}


@router.get("/waiting")
async def waiting_rounds(memory: MemoryDep, owner: OwnerDep) -> dict[str, Any]:
    """The caller's rounds waiting for the person's yes in this process, oldest first."""
    if memory.waiting is None:
        return {"object": "list", "data": []}
    await _forget_taken_up(memory.waiting.of(owner), memory)
    rounds = memory.waiting.of(owner)
    return {"object": "list", "data": [held.shown() for held in rounds]}


async def _forget_taken_up(rounds: list[WaitingRound], memory: MemoryStores) -> None:
    """Rounds a chat message took up on another replica (it marked the verdict's place in the shared store)."""
    undecided = {verdict_key(held.turn_key): held for held in rounds if held.verdict is None}
    if not undecided or memory.waiting is None:
        return
    try:
        found = await memory.pending.get_many(list(undecided))
    except StateStoreError:
        return  # listed a while longer; a verdict on one of them is refused then
    for key, value in found.items():
        if value not in VERDICT_VALUES:
            memory.waiting.taken_up(undecided[key].turn_key)


@router.post("/waiting/{round_id}")
async def decide_round(round_id: str, request: Request, memory: MemoryDep, owner: OwnerDep) -> dict[str, Any]:
    """The person's verdict on one of their waiting rounds, written beside the round in the state store, where
    the chat's next message reads it. The first verdict stands (the store never overwrites); it is returned."""
    held = memory.waiting.find(round_id, owner) if memory.waiting is not None else None
    if held is None:
        raise RouteNotFound("No call waits for approval under this id: it was answered in the chat, timed out, or "
                            "never was.", code="waiting_not_found")
    verdict = _verdict(await _json(request, '{"verdict": "approve"} or "deny"'))
    key = verdict_key(held.turn_key)
    try:
        await memory.pending.put_many({key: verdict.encode()}, owner)
        stands = (await memory.pending.get_many([key])).get(key, verdict.encode())
    except StateStoreError as exc:
        raise Overloaded("The state store cannot keep the verdict now; try again, or answer in the chat.") from exc
    if stands not in VERDICT_VALUES:  # the chat's next message took the round up first
        if memory.waiting is not None:
            memory.waiting.taken_up(held.turn_key)
        raise Conflict("The chat's next message took this round up before the verdict came; nothing was decided "
                       "here.", code="waiting_taken_up")
    held.verdict = "approve" if stands == b"approve" else "deny"
    return {"id": held.id, "decided": held.verdict}


@router.get("/skills")
async def skills(pool: ViewDep) -> dict[str, Any]:
    """The skills of the servers the caller's key may use (app/mcp/skills.py), and the tool that loads them."""
    catalogue = pool.catalogue
    return {"object": "list", "data": [
        {"server": server, "name": skill.name, "description": skill.description, "uri": skill.uri,
         "load_with": next((name for name, route in catalogue.routes.items()
                            if route.loads_skills and route.server == server), None)}
        for server, listed in pool.pool.skills().items() if pool.scope.may_use_server(server) for skill in listed]}


@router.get("/changes")
async def definition_changes(pool: ViewDep) -> dict[str, Any]:
    """The tools whose servers changed their definitions since they were pinned (app/mcp/trusted.py), with the diff;
    of the servers the caller's key may use."""
    return {"object": "list", "data": [
        {"server": change.server, "tool": change.tool, "diff": change.diff}
        for change in pool.pool.definition_changes() if pool.scope.may_use_server(change.server)]}


@router.post("/changes/{server}/{tool}/accept")
async def accept_definition(server: str, tool: str, pool: ViewDep) -> dict[str, Any]:
    """An operator trusts the tool's new definition: it asks as before from the next request. A key limited to some
    servers may not: trusting a definition is for whoever runs the gateway."""
    if not pool.scope.everything:
        raise Forbidden("Only a key that may use every server can accept a changed tool definition.",
                               code="not_an_operator")
    if not await pool.pool.accept_definition(server, tool):
        raise RouteNotFound(f"The tool '{tool}' of '{server}' has no changed definition to accept.",
                            code="change_not_found")
    return {"server": server, "tool": tool, "accepted": True}


@router.get("/grants")
async def grants(memory: MemoryDep, owner: OwnerDep) -> dict[str, Any]:
    """The caller's grants in force (the person's "yes for this chat", "for 1 hour", "always", "never"), oldest first;
    without keys, everyone's. What marks a grant's chat is not shown: it is a digest of the chat's words."""
    try:
        listed = await memory.grants.of(owner) if memory.grants is not None else []
    except StateStoreError as exc:
        raise Overloaded("The grants cannot be read now; try again.") from exc
    return {"object": "list", "data": [_grant_view(grant) for grant in listed]}


@router.post("/grants/{grant_id}/revoke")
async def revoke_grant(grant_id: str, memory: MemoryDep, owner: OwnerDep) -> dict[str, Any]:
    """Takes one of the caller's grants out: the tool asks again from the next call, on every replica."""
    try:
        gone = await memory.grants.revoke(owner, grant_id) if memory.grants is not None else None
    except StateStoreError as exc:
        raise Overloaded("The grants cannot be changed now; try again.") from exc
    if gone is None:
        raise RouteNotFound("No grant of yours has this id: it was revoked or expired.", code="grant_not_found")
    return {"id": gone.id, "revoked": True}


@router.get("/tasks")
async def tasks(pool: ViewDep) -> dict[str, Any]:
    """The background tasks the caller's calls started (MCP tasks that outlived their request, and those that ended
    within it), oldest first; those still running as their servers describe them now."""
    try:
        listed = await pool.pool.tasks_now(pool.scope.caller)
    except StateStoreError as exc:
        raise Overloaded("The tasks cannot be read now; try again.") from exc
    return {"object": "list", "data": [_task_view(entry) for entry in listed]}


@router.post("/tasks/{server}/{task_id}/cancel")
async def cancel_task(server: str, task_id: str, pool: ViewDep) -> dict[str, Any]:
    """Has the server cancel one of the caller's background tasks; the chat hears so at its next turn."""
    try:
        entry = await pool.pool.cancel_task(pool.scope.caller, server, task_id)
    except StateStoreError as exc:
        raise Overloaded("The tasks cannot be read now; try again.") from exc
    except PromptFailed as exc:
        raise Conflict(str(exc), code="task_not_cancelled") from exc
    if entry is None:
        raise RouteNotFound("No task of yours has this id on this server.", code="task_not_found")
    return _task_view(entry)


def _task_view(entry: TaskEntry) -> dict[str, Any]:
    return {"server": entry.server, "task_id": entry.task_id, "tool": entry.tool, "status": entry.status,
            "message": entry.message, "started": entry.started, "updated": entry.updated, "ended": entry.ended}


def _grant_view(grant: Grant) -> dict[str, Any]:
    return {"id": grant.id, "allow": grant.allow, "server": grant.server, "tool": grant.tool,
            "scope": grant.scope.value, "made": grant.made, "expires": grant.expires, "under": grant.under,
            "described": grant.described()}


async def _json(request: Request, usage: str) -> JSONValue:
    """The body as JSON, read as a chat's is: what it may carry bounded, off the event loop when it is large.

    Raises:
        InvalidRequest: not JSON (`usage` says what to send), or more than a request carries.
    """
    try:
        return await read_body(request, lambda body, _: parse_json(body, None))
    except RequestValidationError:
        raise InvalidRequest(f"The body is not JSON: send {usage}.") from None


def _verdict(parsed: JSONValue) -> Verdict:
    verdict = parsed.get("verdict") if isinstance(parsed, dict) else None
    if verdict not in VERDICTS:
        raise InvalidRequest("Say {\"verdict\": \"approve\"} or {\"verdict\": \"deny\"}.", param="verdict")
    return "approve" if verdict == "approve" else "deny"
