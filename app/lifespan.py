"""The long-lived resources: one upstream client and the MCP pool, opened and closed on one stack."""

import asyncio
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TypedDict

import anyio
import structlog

from app import __version__
from app.access import KeyRing
from app.chat import GrantBook, ImageStore, MemoryStores, prepare_ranking
from app.greeting import greet
from app.mcp import (
    Complete,
    ConversionOptions,
    HttpServerConfig,
    McpConfig,
    McpPool,
    PoolOptions,
    TaskBook,
    TrustedDefinitions,
    config_paths,
    load_mcp_configs,
    request_on_change,
    resolve_profile,
)
from app.notify import Notifier
from app.openai.accumulate import TurnAccumulator
from app.openai.result_format import RenderOptions
from app.openai.wire import ChatBody
from app.ops.call_record import CallRecord, ToolCallObserver
from app.ops.metrics import Metrics
from app.ops.recent_calls import RecentCalls
from app.ops.recent_requests import RecentRequests
from app.ops.telemetry import start_tracing
from app.ops.waiting_rounds import WaitingRounds
from app.settings import AccessSettings, ServerSettings, Settings, StateSettings, UpstreamSettings
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
    ranks: bool = False,
) -> McpPool:
    """The MCP pool with the conversion and result settings; shared by the app and `toolbridge tools`. `ranks`: the
    gateway's, whose tool budget ranks each catalogue's tools when it is built; `vault` keeps sign-ins and pins."""
    mcp, tools = settings.mcp, settings.tools
    paths, sampling = config_paths(mcp.config), upstream is not None and mcp.sampling
    options = PoolOptions(
        connect_timeout=mcp.connect_timeout,
        call_timeout=mcp.tool_timeout,
        call_timeout_max=mcp.tool_timeout_max,
        task_wait=mcp.task_wait, task_book=TaskBook(vault) if vault is not None else TaskBook.in_memory(),
        conversion=ConversionOptions(profile=resolve_profile(tools.schema_profile, settings.upstream.base),
                                     prefix=tools.tool_prefix, confirm=settings.approvals.confirm),
        rendering=RenderOptions(result_format=tools.result_format, max_chars=tools.max_result_chars),
        retry=retry,
        block_changed_tools=mcp.block_changed_tools,
        trusted=TrustedDefinitions(vault) if mcp.pin_tools else None,
        sampling_model=mcp.sampling_model or None, resource_tools=mcp.resource_tools,
        max_message_bytes=int(mcp.message_mb * (1 << 20)),
    )
    return McpPool(
        config,
        options,
        load_config=(lambda: load_mcp_configs(paths)) if reload else None,
        watch=paths if reload and mcp.watch_config else (),
        complete=_completer(upstream) if sampling and upstream is not None else None,
        on_tool_call=_observer(metrics, recent),
        vault=vault,
        prepare=partial(prepare_ranking, budget=tools.tool_budget) if ranks and tools.tool_budget else None,
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


def key_ring(access: AccessSettings, toolsets: dict[str, list[str]]) -> KeyRing:
    """The client keys: TOOLBRIDGE_API_KEYS and the keys file, read now; the keys file's toolsets are among
    TOOLBRIDGE_TOOLSETS.

    Raises:
        KeysFileError: the keys file cannot be used.
    """
    return KeyRing(access.client_keys, Path(access.keys_file) if access.keys_file else None, toolsets)


def build_lifespan(
    settings: Settings, keys: KeyRing, *, upstream_transport: Transport | None = None
) -> Callable[[object], AbstractAsyncContextManager[State]]:
    @asynccontextmanager
    async def lifespan(_app: object) -> AsyncIterator[State]:
        config = load_mcp_configs(config_paths(settings.mcp.config))
        metrics = Metrics()
        recent = RecentCalls(show_values=settings.ops.ui_show_values)
        async with AsyncExitStack() as stack:
            if settings.ops.otel:  # registered first, so it flushes the spans of requests cut off at shutdown last
                stack.callback(start_tracing(__version__))
            # Before the upstream: its last model list is kept in the same store.
            memory = await stack.enter_async_context(open_memory(settings.state, settings.approvals.confirm_timeout))
            upstream = await stack.enter_async_context(
                open_upstream(settings.upstream, upstream_transport, metrics=metrics, memory=memory)
            )
            vault = await open_sign_in_vault(settings.state, config, stack)
            # The person's grants live in the vault (shared by replicas, kept over restarts); without one, here.
            memory = replace(memory, grants=GrantBook(vault) if vault is not None else GrantBook.in_memory())
            pool = await stack.enter_async_context(build_pool(
                settings, config, reload=True, upstream=upstream, metrics=metrics, recent=recent, vault=vault,
                ranks=True))
            metrics.watch_servers(pool.health)
            await _notify(settings, pool, memory, stack)
            await _watch_keys(keys, stack)
            _reload_on_sighup([pool.request_reload, keys.reload], stack)
            images = ImageStore(max_bytes=int(settings.tools.image_store_mb * 1024 * 1024),
                                max_age_seconds=settings.tools.image_max_age_hours * 3600)
            await _greet(settings.server, upstream, stack)
            yield {"settings": settings, "upstream": upstream, "pool": pool, "memory": memory, "metrics": metrics,
                   "recent_calls": recent, "images": images, "recent_requests": RecentRequests(),
                   "keys": keys}

    return lifespan


def open_upstream(
    settings: UpstreamSettings, transport: Transport | None, *, metrics: Metrics, memory: MemoryStores
) -> UpstreamClient:
    """The upstream client TOOLBRIDGE_UPSTREAM_* describe (a test may give its own transport), its last model list
    kept in memory's store."""
    return UpstreamClient(
        settings.base,
        api_key=settings.api_key.get_secret_value() if settings.api_key else None,
        timeout=settings.timeout,
        transport=transport or make_transport(settings.transport),
        observe=metrics.observe_upstream,
        models_store=memory.turns,
    )


@asynccontextmanager
async def open_memory(settings: StateSettings, confirm_timeout: float) -> AsyncIterator[MemoryStores]:
    """The store TOOLBRIDGE_STATE_URL names for finished turns; mixed turns wait in it too, or, without one,
    in this process's memory for an hour. Rounds waiting for a yes are kept `confirm_timeout` seconds."""
    bounds = Bounds(max_bytes=int(settings.max_mb * 1024 * 1024),
                    max_age_seconds=settings.max_age_days * 86_400)
    failures: list[str] = []
    async with open_state_store(settings.url, bounds, failures.append, settings.secret_key) as store:
        # Not sealed: nothing outside this process can write its memory.
        pending = MemoryStore(Bounds(max_bytes=bounds.max_bytes, max_age_seconds=PENDING_SECONDS))
        yield MemoryStores(turns=store, pending=store if store is not None else pending,
                           failure=failures[0] if failures else None,
                           waiting=WaitingRounds(max_age_seconds=confirm_timeout))


async def open_sign_in_vault(settings: StateSettings, config: McpConfig, stack: AsyncExitStack) -> Vault | None:
    """The token vault for servers that ask for OAuth, opened for the app's life. Without a key (a key file that
    cannot be used) there is none, and a server that asks for a sign-in says so, unless mcp.json names such a
    server: then the gateway does not start, as with any setting it cannot use.

    Raises:
        TokenKeyError: no key can be had, and mcp.json has a server with `oauth`; or Redis without
            TOOLBRIDGE_TOKEN_KEY, which the state store needs whatever the servers.
    """
    require_key(settings.url, settings.secret_key)
    try:
        return await stack.enter_async_context(open_vault(settings.url, settings.secret_key))
    except TokenKeyError as exc:
        if any(isinstance(server, HttpServerConfig) and server.oauth for server in config.servers.values()):
            raise
        log.warning("sign_in_vault_unavailable", reason=str(exc), effect="servers that ask for OAuth cannot sign in")
        return None


def _completer(upstream: UpstreamClient) -> Complete:
    """One whole (non-streamed) answer from the upstream, for MCP sampling requests."""

    async def complete(body: ChatBody) -> tuple[str, str | None, str | None]:
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


async def _notify(settings: Settings, pool: McpPool, memory: MemoryStores, stack: AsyncExitStack) -> None:
    """TOOLBRIDGE_NOTIFY_URL's webhook hears, for the app's life, when someone must act (app/notify/webhook.py)."""
    ops, server = settings.ops, settings.server
    if ops.notify_url is None:
        return
    link = (server.public_url or f"http://{server.host}:{server.port}").rstrip("/") + "/"
    notifier = Notifier(ops.notify_url.get_secret_value(), link, fmt=ops.notify_format, after=ops.notify_after,
                        values=ops.notify_values)
    watcher = await stack.enter_async_context(anyio.create_task_group())
    stack.callback(watcher.cancel_scope.cancel)
    watcher.start_soon(notifier.watch, pool, memory.waiting, name="notify")


async def _greet(settings: ServerSettings, upstream: UpstreamClient, stack: AsyncExitStack) -> None:
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
