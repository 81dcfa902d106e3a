"""The long-lived resources: one upstream client and the MCP pool, opened and closed on one stack."""

import asyncio
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, TypedDict

import anyio
import structlog

from app import __version__
from app.access import KeyRing
from app.chat.images import ImageStore
from app.chat.memory import MemoryStores
from app.chat.tool_budget import load_ranker_in_background
from app.greeting import greet
from app.mcp import (
    Complete,
    ConversionOptions,
    HttpServerConfig,
    McpConfig,
    McpPool,
    PoolOptions,
    config_paths,
    load_mcp_configs,
    request_on_change,
    resolve_profile,
)
from app.openai.accumulate import TurnAccumulator
from app.openai.result_format import RenderOptions
from app.ops.call_record import CallRecord, ToolCallObserver
from app.ops.metrics import Metrics
from app.ops.recent_calls import RecentCalls
from app.ops.recent_requests import RecentRequests
from app.ops.telemetry import start_tracing
from app.ops.waiting_rounds import WaitingRounds
from app.settings import Settings
from app.state import Bounds, MemoryStore, TokenKeyError, Vault, open_state_store, open_vault, require_key
from app.upstream import Transport, UpstreamClient, make_transport

log = structlog.get_logger("toolbridge.app")

PENDING_SECONDS = 3_600.0  # a client coming back with its tools' results later than this starts afresh


class State(TypedDict):
    settings: Settings
    upstream: UpstreamClient
    pool: McpPool
    memory: MemoryStores
    metrics: Metrics
    recent_calls: RecentCalls
    images: ImageStore
    recent_requests: RecentRequests
    keys: KeyRing


def build_pool(
    settings: Settings,
    config: McpConfig,
    *,
    retry: bool = True,
    reload: bool = False,
    upstream: UpstreamClient | None = None,
    metrics: Metrics | None = None,
    recent: RecentCalls | None = None,
    vault: Vault | None = None,
) -> McpPool:
    """The MCP pool with the conversion and result settings; shared by the app and `toolbridge tools`."""
    paths = config_paths(settings.mcp_config)
    sampling = upstream is not None and settings.sampling
    options = PoolOptions(
        connect_timeout=settings.mcp_connect_timeout,
        call_timeout=settings.tool_timeout,
        call_timeout_max=settings.tool_timeout_max,
        conversion=ConversionOptions(profile=resolve_profile(settings.schema_profile, settings.upstream_base),
                                     prefix=settings.tool_prefix, confirm=settings.confirm),
        rendering=RenderOptions(result_format=settings.result_format, max_chars=settings.max_result_chars),
        retry=retry,
        block_changed_tools=settings.block_changed_tools,
        sampling_model=settings.sampling_model or None,
        resource_tools=settings.resource_tools,
        max_message_bytes=int(settings.mcp_message_mb * (1 << 20)),
    )
    return McpPool(
        config,
        options,
        load_config=(lambda: load_mcp_configs(paths)) if reload else None,
        watch=paths if reload and settings.watch_config else (),
        complete=_completer(upstream) if sampling and upstream is not None else None,
        on_tool_call=_observer(metrics, recent),
        vault=vault,
    )


def _observer(metrics: Metrics | None, recent: RecentCalls | None) -> ToolCallObserver | None:
    """Every call: among the recent calls, and, when it named a real tool, in the metrics."""
    if metrics is None and recent is None:
        return None

    def observe(call: CallRecord) -> None:
        if metrics is not None and call.server is not None:  # a model's made-up names would be endless labels
            metrics.observe_tool_call(call)
        if recent is not None:
            recent.add(call)

    return observe


def key_ring(settings: Settings) -> KeyRing:
    """The client keys: TOOLBRIDGE_API_KEYS and the keys file, read now.

    Raises:
        KeysFileError: the keys file cannot be used.
    """
    return KeyRing(settings.client_keys, Path(settings.keys_file) if settings.keys_file else None, settings.toolsets)


def build_lifespan(
    settings: Settings, keys: KeyRing, *, upstream_transport: Transport | None = None
) -> Callable[[Any], AbstractAsyncContextManager[State]]:
    @asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[State]:
        config = load_mcp_configs(config_paths(settings.mcp_config))
        metrics = Metrics()
        recent = RecentCalls(show_values=settings.ui_show_values)
        async with AsyncExitStack() as stack:
            if settings.otel:  # registered first, so it flushes the spans of requests cut off at shutdown last
                stack.callback(start_tracing(__version__))
            # Before the upstream: its last model list is kept in the same store.
            memory = await stack.enter_async_context(open_memory(settings))
            upstream = await stack.enter_async_context(
                UpstreamClient(
                    settings.upstream_base,
                    api_key=settings.upstream_api_key.get_secret_value() if settings.upstream_api_key else None,
                    timeout=settings.upstream_timeout,
                    transport=upstream_transport or make_transport(settings.upstream_transport),
                    observe=metrics.observe_upstream,
                    models_store=memory.turns,
                )
            )
            vault = await open_sign_in_vault(settings, config, stack)
            pool = await stack.enter_async_context(build_pool(
                settings, config, reload=True, upstream=upstream, metrics=metrics, recent=recent, vault=vault))
            metrics.watch_servers(pool.health)
            await _watch_keys(keys, stack)
            _reload_on_sighup([pool.request_reload, keys.reload], stack)
            if settings.tool_budget:
                load_ranker_in_background()
            images = ImageStore(max_bytes=int(settings.image_store_mb * 1024 * 1024),
                                max_age_seconds=settings.image_max_age_hours * 3600)
            await _greet(settings, upstream, stack)
            yield {"settings": settings, "upstream": upstream, "pool": pool, "memory": memory, "metrics": metrics,
                   "recent_calls": recent, "images": images, "recent_requests": RecentRequests(),
                   "keys": keys}

    return lifespan


@asynccontextmanager
async def open_memory(settings: Settings) -> AsyncIterator[MemoryStores]:
    """The store TOOLBRIDGE_STATE_URL names for finished turns; mixed turns wait in it too, or, without one,
    in this process's memory for an hour."""
    bounds = Bounds(max_bytes=int(settings.state_max_mb * 1024 * 1024),
                    max_age_seconds=settings.state_max_age_days * 86_400)
    failures: list[str] = []
    async with open_state_store(settings.state_url, bounds, failures.append, _token_key(settings)) as store:
        # Not sealed: nothing outside this process can write its memory.
        pending = MemoryStore(Bounds(max_bytes=bounds.max_bytes, max_age_seconds=PENDING_SECONDS))
        yield MemoryStores(turns=store, pending=store if store is not None else pending,
                           failure=failures[0] if failures else None,
                           waiting=WaitingRounds(max_age_seconds=settings.confirm_timeout))


async def open_sign_in_vault(settings: Settings, config: McpConfig, stack: AsyncExitStack) -> Vault | None:
    """The token vault for servers that ask for OAuth, opened for the app's life. Without a key (a key file that
    cannot be used) there is none, and a server that asks for a sign-in says so, unless mcp.json names such a
    server: then the gateway does not start, as with any setting it cannot use.

    Raises:
        TokenKeyError: no key can be had, and mcp.json has a server with `oauth`; or Redis without
            TOOLBRIDGE_TOKEN_KEY, which the state store needs whatever the servers.
    """
    require_key(settings.state_url, _token_key(settings))
    try:
        return await stack.enter_async_context(open_vault(settings.state_url, _token_key(settings)))
    except TokenKeyError as exc:
        if any(isinstance(server, HttpServerConfig) and server.oauth for server in config.servers.values()):
            raise
        log.warning("sign_in_vault_unavailable", reason=str(exc), effect="servers that ask for OAuth cannot sign in")
        return None


def _token_key(settings: Settings) -> str | None:
    return settings.token_key.get_secret_value() if settings.token_key else None


def _completer(upstream: UpstreamClient) -> Complete:
    """One whole (non-streamed) answer from the upstream, for MCP sampling requests."""

    async def complete(body: dict[str, Any]) -> tuple[str, str | None, str | None]:
        turn = TurnAccumulator()
        async with upstream.stream_chat(body) as batches:
            async for batch in batches:
                for chunk in batch:
                    turn.add(chunk)
        turn.finish()
        return turn.content, turn.finish_reason, turn.model

    return complete


async def _watch_keys(keys: KeyRing, stack: AsyncExitStack) -> None:
    """The keys file re-read whenever it is saved, always: a key taken out must stop working then, without a
    setting or a signal the operator might forget. mcp.json's watcher, on this one file."""
    if keys.path is None:
        return
    watchers = await stack.enter_async_context(anyio.create_task_group())
    stack.callback(watchers.cancel_scope.cancel)  # runs first, ending the watcher before the group is left
    watchers.start_soon(request_on_change, [keys.path.resolve()], keys.reload, name="keys:watch")


async def _greet(settings: Settings, upstream: UpstreamClient, stack: AsyncExitStack) -> None:
    """The start-up lines (app/greeting.py) once the first look at the model server is done; the gateway answers
    meanwhile, and a model server that takes the probes' timeout to fail holds nothing up."""
    greeter = await stack.enter_async_context(anyio.create_task_group())
    stack.callback(greeter.cancel_scope.cancel)
    greeter.start_soon(greet, settings, upstream, name="greeting")


def _reload_on_sighup(reloads: list[Callable[[], None]], stack: AsyncExitStack) -> None:
    """`kill -HUP` re-reads mcp.json and the keys file, as daemons do; on platforms without SIGHUP nothing
    happens."""
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGHUP, lambda: [reload() for reload in reloads])
    except (NotImplementedError, RuntimeError, ValueError):  # Windows, or not the main thread (tests)
        return
    stack.callback(loop.remove_signal_handler, signal.SIGHUP)
