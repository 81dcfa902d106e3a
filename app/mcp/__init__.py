"""The MCP servers of mcp.json, connected and their tools offered to the loop: the names the rest of the
gateway uses. Start-up builds a `McpPool` from `load_mcp_configs` and `PoolOptions`; requests take their
tools from it; the status page and the CLI read its servers' states. How a server is kept connected, a
call run, a result rendered is inside (docs/architecture.md, the code map)."""

from app.mcp.config import (
    HttpServerConfig,
    McpConfig,
    McpConfigError,
    config_paths,
    load_mcp_config,
    load_mcp_configs,
)
from app.mcp.convert import ConversionOptions, resolve_profile
from app.mcp.key_view import KeyView
from app.mcp.options import PoolOptions
from app.mcp.pool import McpPool
from app.mcp.prompts import PromptBook, PromptEntry, PromptFailed, build_prompt_book, has_images, openai_messages
from app.mcp.reload import request_on_change
from app.mcp.sampling import Complete
from app.mcp.server_auth import ServerAuth, SignInUnavailable
from app.mcp.sign_in import SIGN_IN_SECONDS, SignInFailed
from app.mcp.sign_in import finish as finish_sign_in
from app.mcp.sign_in import start as start_sign_in
from app.mcp.status import ServerState
from app.mcp.task_book import TaskBook, TaskEntry
from app.mcp.trusted import Change, TrustedDefinitions
from app.mcp.waits import first_of

__all__ = [
    "SIGN_IN_SECONDS",
    "Change",
    "Complete",
    "ConversionOptions",
    "HttpServerConfig",
    "KeyView",
    "McpConfig",
    "McpConfigError",
    "McpPool",
    "PoolOptions",
    "PromptBook",
    "PromptEntry",
    "PromptFailed",
    "ServerAuth",
    "ServerState",
    "SignInFailed",
    "SignInUnavailable",
    "TaskBook",
    "TaskEntry",
    "TrustedDefinitions",
    "build_prompt_book",
    "config_paths",
    "finish_sign_in",
    "first_of",
    "has_images",
    "load_mcp_config",
    "load_mcp_configs",
    "openai_messages",
    "request_on_change",
    "resolve_profile",
    "start_sign_in",
]
