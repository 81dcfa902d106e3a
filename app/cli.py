"""`toolbridge` runs the gateway; `toolbridge tools` prints the OpenAI tools the model will be given.

Every setting is a TOOLBRIDGE_* variable and a matching flag (`--upstream-url`, `--port`, ...).
"""

import json
import sys
from typing import Literal

import anyio
import uvicorn
from pydantic import Field
from pydantic_settings import CliApp, CliPositionalArg, SettingsConfigDict

from app.lifespan import build_pool
from app.logging import configure_logging
from app.mcp.config import McpConfigError, config_paths, load_mcp_configs
from app.mcp.pool import ServerState
from app.settings import Settings


class CommandLine(Settings):
    model_config = SettingsConfigDict(cli_prog_name="toolbridge", cli_kebab_case=True, cli_implicit_flags=True)

    command: CliPositionalArg[Literal["serve", "tools"]] = Field(
        "serve",
        description="serve: run the gateway. tools: connect to the MCP servers, print their tools as "
        "OpenAI function tools (JSON), and exit.",
    )


def main(argv: list[str] | None = None) -> int:
    args = CliApp.run(CommandLine, cli_args=sys.argv[1:] if argv is None else argv)
    configure_logging(args.log_format, args.log_level)
    try:
        load_mcp_configs(config_paths(args.mcp_config))
    except McpConfigError as exc:
        print(f"toolbridge: {exc}", file=sys.stderr)
        return 2
    if args.command == "tools":
        return anyio.run(print_tools, args)
    serve(args)
    return 0


def serve(settings: Settings) -> None:
    from app.main import create_app

    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_config=None,
        timeout_graceful_shutdown=settings.shutdown_grace,
    )


async def print_tools(settings: Settings) -> int:
    """Prints the tools as JSON on stdout; servers that failed are named on stderr (exit status 1)."""
    pool = build_pool(settings, load_mcp_configs(config_paths(settings.mcp_config)), retry=False)
    async with pool:
        await pool.wait_settled()
        tools = list(pool.catalogue.openai_tools)
        health = pool.health()
    print(json.dumps(tools, indent=2, ensure_ascii=False))
    failed = {name: s for name, s in health.items() if s["state"] == ServerState.FAILED}
    for name, status in failed.items():
        print(f"toolbridge: MCP server '{name}' failed: {status.get('error')}", file=sys.stderr)
    return 1 if failed else 0
