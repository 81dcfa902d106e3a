"""`toolbridge` runs the gateway; `toolbridge tools` prints the OpenAI tools the model will be given (and, on
stderr, those that ask the person first).

Every setting is a TOOLBRIDGE_* variable and a matching flag (`--upstream-url`, `--port`, ...).
"""

import gc
import importlib.util
import json
import os
import sys
from contextlib import AsyncExitStack
from typing import Literal

import anyio
import uvicorn
from pydantic import Field, ValidationError
from pydantic_core import ErrorDetails
from pydantic_settings import CliApp, CliPositionalArg, SettingsConfigDict, SettingsError

from app.access import KeysFileError
from app.lifespan import build_pool, key_ring, open_sign_in_vault
from app.logging import configure_logging
from app.main import create_app
from app.mcp import McpConfigError, ServerState, config_paths, load_mcp_configs
from app.serving import CleanStopServer, bounded_protocol
from app.settings import SECRET_SETTINGS, FlatSettingsBase, Settings, with_every_setting
from app.state import TokenKeyError, require_key

GC_YOUNG_THRESHOLD = 10_000  # allocations between collections of the youngest objects (Python's default: 700)


class _Command(FlatSettingsBase):
    model_config = SettingsConfigDict(cli_prog_name="toolbridge", cli_kebab_case=True, cli_implicit_flags=True)

    command: CliPositionalArg[Literal["serve", "tools"]] = Field(
        "serve",
        description="serve: run the gateway. tools: connect to the MCP servers, print their tools as "
        "OpenAI function tools (JSON), and exit.",
    )
    changes: bool = Field(
        False, description="with tools: print instead each tool whose definition changed since it was pinned, as a "
        "diff (TOOLBRIDGE_PIN_TOOLS).",
    )


CommandLine = with_every_setting(_Command, "CommandLine")  # the command, then every setting by its flat name


ONE_PROCESS = (
    "--workers is not supported, toolbridge runs as one process: each worker would start its own copy of every "
    "stdio MCP server, and a turn's pending client tool calls live in the process. One core serves about 2,500 chats "
    "a second; for more, run replicas behind a proxy that share TOOLBRIDGE_STATE_URL (docs/operations.md: Replicas)."
)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "TOOLBRIDGE_WORKERS" in os.environ or any(arg.partition("=")[0] == "--workers" for arg in argv):
        print(f"toolbridge: {ONE_PROCESS}", file=sys.stderr)  # not argparse's bare "unrecognized arguments"
        return 2
    try:
        args = CliApp.run(CommandLine, cli_args=argv)
        settings = Settings.from_flat(args)
    except ValidationError as exc:
        for error in exc.errors():
            print(f"toolbridge: {describe_setting_error(error)}", file=sys.stderr)
        return 2
    except SettingsError as exc:  # a value the environment or .env gives in a form no parser reads
        print(f"toolbridge: {exc}", file=sys.stderr)
        return 2
    try:
        keys = key_ring(settings.access, settings.tools.toolsets)
        require_key(settings.state.url, settings.state.secret_key)
    except (KeysFileError, TokenKeyError) as exc:  # the message names the file or setting and the problem, no key
        print(f"toolbridge: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.ops.log_format, settings.ops.log_level, secrets=[*settings.secrets(), *keys.secrets()])
    if settings.ops.otel and importlib.util.find_spec("opentelemetry.sdk") is None:
        print("toolbridge: TOOLBRIDGE_OTEL needs the otel extra: pip install 'toolbridge[otel]'", file=sys.stderr)
        return 2
    try:
        load_mcp_configs(config_paths(settings.mcp.config))
    except McpConfigError as exc:
        print(f"toolbridge: {exc}", file=sys.stderr)
        return 2
    if args.command == "tools":
        return anyio.run(print_changes if args.changes else print_tools, settings)
    serve(settings)
    return 0


def describe_setting_error(error: ErrorDetails) -> str:
    """One line: the setting as both spellings, the value given (hidden for keys), and what was expected."""
    field = str(error["loc"][0]) if error.get("loc") else "?"
    given = "(hidden)" if field in SECRET_SETTINGS else repr(_without_credentials(error.get("input")))
    expected = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    return f"TOOLBRIDGE_{field.upper()} (--{field.replace('_', '-')}) = {given}: {expected}"


def _without_credentials(value: object) -> object:
    """A URL's user and password left out (a state URL may carry Redis's), anything else as it is."""
    if isinstance(value, str) and "://" in value and "@" in value:
        scheme, _, rest = value.partition("://")
        return f"{scheme}://{rest.rsplit('@', 1)[-1]}"
    return value


def serve(settings: Settings) -> None:
    config = uvicorn.Config(
        create_app(settings),
        host=settings.server.host,
        port=settings.server.port,
        log_config=None,
        access_log=False,  # the request log (app/logging.py) writes one line per request already
        # uvicorn annotates this int, but only passes it to asyncio.wait_for as a timeout: a float works and keeps
        # a grace such as 2.5 s exact
        timeout_graceful_shutdown=settings.server.shutdown_grace,  # type: ignore[arg-type]
        http=bounded_protocol(settings.server.client_timeout),
        # No route takes a WebSocket: uvicorn's "auto" imported the websockets library at start (0.4 MB) to upgrade
        # connections only for the app to refuse them; an upgrade request is now an ordinary HTTP request.
        ws="none",
    )
    # Bound before the lifespan starts the MCP servers: a port in use fails at once, having started nothing.
    listening = config.bind_socket()
    # uvicorn marks the socket inheritable for its own worker processes; here it would be inherited by every
    # stdio MCP server instead (and by their helpers), which could then accept the gateway's connections with
    # their keys, keep the port after the gateway dies, and keep accepting during the shutdown grace.
    listening.set_inheritable(False)
    _tune_garbage_collection()
    CleanStopServer(config).run(sockets=[listening])


def _tune_garbage_collection() -> None:
    """Python's default collects the youngest objects every 700 allocations, and a request allocates
    thousands: with tens of requests in flight, their live objects were scanned again and again, and
    collection cost a third of the gateway's throughput (bench/compare.py: 1,800 -> 2,800 RPS at c=16).
    What the imports made lives as long as the process: frozen, no collection walks it again."""
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


async def print_changes(settings: Settings) -> int:
    """Prints each tool whose server now defines it otherwise than when it was pinned (the gateway's state store
    keeps the pins), as a diff; status 1 when any did, 2 when pinning is off."""
    if not settings.mcp.pin_tools:
        print("toolbridge: TOOLBRIDGE_PIN_TOOLS is off: no definition is pinned", file=sys.stderr)
        return 2
    config = load_mcp_configs(config_paths(settings.mcp.config))
    async with AsyncExitStack() as stack:
        vault = await open_sign_in_vault(settings.state, config, stack)
        pool = await stack.enter_async_context(build_pool(settings, config, retry=False, vault=vault))
        await pool.wait_settled()
        changes = pool.definition_changes()
    for change in changes:
        print(f"{change.server} / {change.tool}: changed since it was pinned\n{change.diff}\n", flush=True)
    if not changes:
        print("toolbridge: no tool's definition changed since it was pinned", file=sys.stderr)
    return 1 if changes else 0


async def print_tools(settings: Settings) -> int:
    """Prints the tools as JSON on stdout; on stderr, the tools whose calls wait for the person's yes
    (TOOLBRIDGE_CONFIRM, mcp.json's "confirm"), the servers that wait for a sign-in, and those that failed
    (exit status 1). Servers a person signed in to use the gateway's stored sign-in."""
    config = load_mcp_configs(config_paths(settings.mcp.config))
    async with AsyncExitStack() as stack:
        vault = await open_sign_in_vault(settings.state, config, stack)
        pool = await stack.enter_async_context(build_pool(settings, config, retry=False, vault=vault))
        await pool.wait_settled()
        catalogue = pool.catalogue
        health = pool.health()
    try:
        print(json.dumps(list(catalogue.openai_tools), indent=2, ensure_ascii=False), flush=True)
    except BrokenPipeError:  # `toolbridge tools | head`: the reader has what it wanted; no traceback at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    for name, route in catalogue.routes.items():  # not in the JSON: it is what the model is sent, as sent
        if route.asks_first:
            print(f"toolbridge: {name} (server '{route.server}') asks first: a call waits for the person's yes",
                  file=sys.stderr)
    for name, status in health.items():
        if status["state"] == ServerState.NEEDS_SIGN_IN:
            print(f"toolbridge: MCP server '{name}' needs a sign-in: start the gateway and press Sign in on its "
                  "status page", file=sys.stderr)
    failed = {name: s for name, s in health.items() if s["state"] == ServerState.FAILED}
    for name, status in failed.items():
        print(f"toolbridge: MCP server '{name}' failed: {status.get('error')}", file=sys.stderr)
    return 1 if failed else 0
