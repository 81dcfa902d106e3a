"""Typed access to the lifespan state, as Annotated dependencies, for every route but chat completions
(which reads `request.state` itself: resolving dependencies on the busiest route cost a tenth of it).

All are `async def`: FastAPI runs a plain `def` dependency in a worker thread, a thread hop per
dependency on every request.
"""

from typing import Annotated

from fastapi import Depends, Request

from app.access import EVERYTHING, KeyRing, KeyScope
from app.access import presented_key as bearer_or_header_key
from app.api.guard import basic_password
from app.chat import ImageStore, MemoryStores, memory_owner
from app.mcp import KeyView, McpPool
from app.ops.metrics import Metrics
from app.ops.recent_calls import RecentCalls
from app.ops.recent_requests import RecentRequests
from app.settings import Settings
from app.upstream import UpstreamClient


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.state.settings  # State attributes are Any
    return settings


async def get_upstream(request: Request) -> UpstreamClient:
    upstream: UpstreamClient = request.state.upstream  # State attributes are Any
    return upstream


async def get_pool(request: Request) -> McpPool:
    pool: McpPool = request.state.pool  # State attributes are Any
    return pool


async def get_memory(request: Request) -> MemoryStores:
    memory: MemoryStores = request.state.memory  # State attributes are Any
    return memory


async def get_metrics(request: Request) -> Metrics:
    metrics: Metrics = request.state.metrics  # State attributes are Any
    return metrics


async def get_recent_calls(request: Request) -> RecentCalls:
    recent_calls: RecentCalls = request.state.recent_calls  # State attributes are Any
    return recent_calls


async def get_images(request: Request) -> ImageStore:
    images: ImageStore = request.state.images  # State attributes are Any
    return images


async def get_recent_requests(request: Request) -> RecentRequests:
    recent_requests: RecentRequests = request.state.recent_requests  # State attributes are Any
    return recent_requests


async def get_key_scope(request: Request) -> KeyScope:
    """What the caller's key may use (set by `guard.AdmissionGuard`)."""
    scope: KeyScope = getattr(request.state, "key_scope", EVERYTHING)
    return scope


async def get_view(request: Request) -> KeyView:
    """The MCP pool as the caller's key sees it: every route reaches the servers through this."""
    keys: KeyRing = request.state.keys  # State attributes are Any
    return KeyView(request.state.pool, await get_key_scope(request), keys.now)


async def get_keys(request: Request) -> KeyRing:
    keys: KeyRing = request.state.keys  # State attributes are Any
    return keys


async def get_authorised(request: Request) -> bool:
    """Whether the caller showed a valid key, or none is needed (set by `guard.AdmissionGuard`)."""
    return bool(getattr(request.state, "authorised", False))


SettingsDep = Annotated[Settings, Depends(get_settings)]


async def get_owner(request: Request, settings: SettingsDep) -> str:
    """Whose conversation memory the caller's key opens (memory_keys.memory_owner), "" (everyone's) without keys.
    The page sends the key as a Basic password, other clients as a bearer key; the guard let in only ours."""
    if not settings.access.authenticates:
        return memory_owner(None)
    return memory_owner(presented_key(request))


def presented_key(request: Request) -> str:
    """The key the caller sent: a Basic password from the page, a bearer key (or `x-api-key`) from other clients."""
    scheme, _, presented = request.headers.get("authorization", "").partition(" ")
    return basic_password(presented.strip()) if scheme.lower() == "basic" else bearer_or_header_key(request.headers)


UpstreamDep = Annotated[UpstreamClient, Depends(get_upstream)]
PoolDep = Annotated[McpPool, Depends(get_pool)]
MemoryDep = Annotated[MemoryStores, Depends(get_memory)]
OwnerDep = Annotated[str, Depends(get_owner)]
AuthorisedDep = Annotated[bool, Depends(get_authorised)]
KeyScopeDep = Annotated[KeyScope, Depends(get_key_scope)]
ViewDep = Annotated[KeyView, Depends(get_view)]
KeysDep = Annotated[KeyRing, Depends(get_keys)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
RecentCallsDep = Annotated[RecentCalls, Depends(get_recent_calls)]
ImagesDep = Annotated[ImageStore, Depends(get_images)]
RecentRequestsDep = Annotated[RecentRequests, Depends(get_recent_requests)]
