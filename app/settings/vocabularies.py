"""The words settings take: each vocabulary a setting chooses from, spelled once, here, where the modules that
act on it (and the settings) import it without importing the MCP SDK or an HTTP client; and the state URL:
its kinds, and where it points by default.

Nothing from app is imported here: settings stays a leaf that anything may read.
"""

from pathlib import Path
from typing import Literal

from platformdirs import user_data_dir

# mcp/approval.py: which MCP tool calls wait for the person's yes, where mcp.json's `confirm` does not say
ConfirmPolicy = Literal["off", "destructive", "writes", "all"]
TransportKind = Literal["aiohttp", "httpx"]  # upstream/client.py: the HTTP stack for upstream calls
PrefixMode = Literal["always", "on-conflict"]  # mcp/convert.py: when a tool's name gets its server's prefix
Profile = Literal["lmstudio", "llamacpp", "openai", "passthrough"]  # mcp/schema.py: an upstream's schema rules
ProfileSetting = Literal["auto", Profile]  # auto: chosen by the upstream (convert.resolve_profile)
ResultFormat = Literal["envelope", "text"]  # openai/envelope.py: a tool result as the model reads it
TraceMode = Literal["reasoning", "details", "markdown", "off"]  # chat/trace.py: how tool work is shown to people
ToolDiscovery = Literal["off", "find_tools"]  # chat/tool_discovery.py: a catalogue past the budget in two steps


def default_state_url() -> str:
    """A SQLite file in the user's data directory (~/.local/share/toolbridge on Linux)."""
    return "sqlite:///" + str(Path(user_data_dir("toolbridge", appauthor=False)) / "state.db")


def parse_state_url(url: str) -> tuple[str, Path | None]:
    """("sqlite", its path) | ("redis", None) | ("memory", None) | ("none", None). SQLite URLs follow
    SQLAlchemy's spelling: three slashes and a relative path, or four slashes for an absolute one; Redis
    URLs are redis-py's (redis://[:password@]host:port/db, rediss:// for TLS).

    Raises:
        ValueError: a URL of another kind, or a SQLite URL without a path.
    """
    text = url.strip()
    if text.lower() in ("none", "off", ""):
        return "none", None
    if text.lower() in ("memory://", "memory"):
        return "memory", None
    if text.lower().startswith(("redis://", "rediss://")):
        return "redis", None
    if text.lower().startswith("sqlite:///"):
        path = text[len("sqlite:///"):]
        if not path:
            raise ValueError("a sqlite:/// URL needs a file path, e.g. sqlite:////var/lib/toolbridge/state.db")
        return "sqlite", Path(path).expanduser()
    raise ValueError(f"must be sqlite:///PATH, redis://HOST:PORT/DB, memory:// or none; got '{url.split('@')[-1]}'")
