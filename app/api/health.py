"""What /health reports: "ok" or "degraded" to anyone; to callers with a key (or when no keys are set)
the whole picture: the upstream (whether it answers and since when, its models, whether the model lists served
are its own or the last it gave), each MCP server's state, the tool count, the memory's store and the
config files. A key limited to some servers (the keys file) sees those servers and their tools alone, and
neither the config files nor the keys file.
Servers' errors carry their stderr, which may hold what users sent them or what the operator set."""

import time
from typing import Any

from app.access import KeyRing
from app.chat import MemoryStores
from app.mcp import KeyView, resolve_profile
from app.settings import Settings
from app.upstream import UpstreamClient


async def health_report(
    view: KeyView, upstream: UpstreamClient, settings: Settings, authorised: bool, memory: MemoryStores, keys: KeyRing
) -> dict[str, Any]:
    pool = view.pool
    config = pool.config
    memory_problem = await memory.problem()
    seen = await upstream.watch.fresh()
    degraded = (pool.degraded or not config.found or memory_problem or keys.problem or pool.config_problem
                or seen.reachable is False)
    status = "degraded" if degraded else "ok"
    if not authorised:
        return {"status": status}
    body: dict[str, Any] = {
        "status": status,
        "upstream": {"url": upstream.base_url, "kind": await upstream.server_kind(),
                     "schema_profile": resolve_profile(settings.tools.schema_profile, settings.upstream.base),
                     **seen.describe(time.time()), "model_list": upstream.last_models.describe()},
        "servers": view.health(),
        "tools": len(view.catalogue.openai_tools),
        # "none" also when a configured file could not be opened (state_store_unavailable in the log).
        "memory": {"store": memory.turns.kind if memory.turns is not None else "none",
                   **({"error": memory_problem} if memory_problem else {})},
    }
    if not view.scope.everything:
        return body
    body["mcp_config"] = {
        "path": str(config.path),
        "found": config.found,
        "files": [{"path": str(path), "found": found} for path, found in config.files],
    }
    if not config.found:
        body["mcp_config"]["note"] = "file not found: no MCP tools are offered"
    if pool.config_problem:  # a reload failed: the servers are the last good file's
        body["mcp_config"]["error"] = pool.config_problem
    if keys.path is not None:
        body["keys_file"] = keys.describe()
    return body
