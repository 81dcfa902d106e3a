"""One MCP server's entry in /health, as the status page, the metrics and the CLI read it: plain data, so that
operations need nothing of the MCP side that makes it (app/mcp/status.py writes it, app/mcp/server_auth.py and
app/mcp/key_view.py add the sign-in's fields)."""

from typing import Required, TypedDict


class ServerHealth(TypedDict, total=False):
    """Its state always; the rest when there is something to say."""

    state: Required[str]  # a ServerState's value, or "unknown" for a server the pool does not have
    transport: str  # "stdio", "http", "sse"; "unknown" or "none" for an entry that never runs
    tools: int
    error: str
    restarts: int
    last_error: str
    protocol_version: str
    up_seconds: float
    signed_in: bool  # a server a person signs in to: whether someone has
    may_sign_in: bool  # beside `signed_in`, as one key sees it: whether this key may sign in or out
