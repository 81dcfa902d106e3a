"""A server's state and who learns what of it: /health and the operator see its error (which carries its
stderr); a model, and so whoever shares the gateway, sees only the state."""

import time
from dataclasses import dataclass, field
from enum import StrEnum

from app.mcp.config import McpConfig, ServerConfig, StdioServerConfig
from app.ops.server_health import ServerHealth


class ServerState(StrEnum):
    STARTING = "starting"
    READY = "ready"
    RESTARTING = "restarting"
    FAILED = "failed"
    DISABLED = "disabled"
    STOPPED = "stopped"
    NEEDS_SIGN_IN = "needs_sign_in"  # an HTTP server that asks for OAuth, and nobody signed in yet


@dataclass
class ServerStatus:
    state: ServerState
    transport: str
    tools: int = 0
    error: str | None = None
    protocol_version: str | None = None
    restarts: int = 0
    last_error: str | None = None
    ready_since: float | None = None  # time.monotonic() when this connection became ready
    first_start: float = field(default_factory=time.monotonic)  # when the server's first start began

    def starting_for(self) -> float | None:
        """Seconds since the first start began, while it goes on; None once past it."""
        return time.monotonic() - self.first_start if self.state is ServerState.STARTING else None

    def as_dict(self) -> ServerHealth:
        out: ServerHealth = {"state": self.state.value, "transport": self.transport, "tools": self.tools}
        if self.error:
            out["error"] = self.error
        if self.restarts:
            out["restarts"] = self.restarts
        if self.last_error and self.last_error != self.error:
            out["last_error"] = self.last_error
        if self.protocol_version:
            out["protocol_version"] = self.protocol_version
        if self.state is ServerState.READY and self.ready_since is not None:
            out["up_seconds"] = round(time.monotonic() - self.ready_since, 1)
        return out


def unrun_statuses(config: McpConfig) -> dict[str, ServerStatus]:
    """The statuses of the entries of mcp.json that never run: broken ones and disabled ones."""
    statuses = {name: ServerStatus(ServerState.FAILED, "unknown", error=problem)
                for name, problem in config.problems.items()}
    return statuses | {name: ServerStatus(ServerState.DISABLED, "none") for name in config.disabled}


def unavailable(server: str, state: ServerState) -> str:
    """What a model (and so the user, and whoever shares the gateway) learns of a server that is down: its
    state, never its error, which carries the server's stderr (other users' arguments, the operator's
    secrets). The operator finds the error in the log and in /health."""
    if state in (ServerState.STARTING, ServerState.RESTARTING):
        return f"MCP server '{server}' is {state.value}; try again in a moment."
    if state is ServerState.NEEDS_SIGN_IN:
        return (f"MCP server '{server}' needs a person to sign in before its tools can be used (the gateway's status "
                "page has a Sign in button).")
    if state is ServerState.FAILED:
        return f"MCP server '{server}' is not available: it failed to start (the gateway's operator can see why)."
    return f"MCP server '{server}' is {state.value}."


def transport_name(server: ServerConfig) -> str:
    if isinstance(server, StdioServerConfig):
        return "stdio"
    return "sse" if server.is_legacy_sse else "http"
