"""What one chat request makes of the tool loop, from the settings and the request: how many tool rounds,
the system hint, whether MCP tools are offered at all (not for Open WebUI's background tasks), whether
the model is shown the images tools return, which tools its user selected, the model's context, and the
conversation's memory."""

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import structlog

from app.mcp.results import RenderOptions, system_hint
from app.memory import ConversationMemory, MemoryStores, memory_owner
from app.open_webui import chat_id, is_background_task
from app.ports import ALL_TOOLS, BudgetChoice, LoopOptions, ToolSelection
from app.settings import Settings
from app.tool_budget import UNLIMITED, Budget, budget_for, choose_within

log = structlog.get_logger("toolbridge.tools")


class ModelFacts(Protocol):
    async def supports_vision(self, model: str | None) -> bool: ...

    async def context_lengths(self) -> dict[str, int]: ...


def loop_options(
    settings: Settings, body: dict[str, Any], upstream: ModelFacts, selection: ToolSelection = ALL_TOOLS
) -> LoopOptions:
    background_task = settings.skip_tools_for_tasks and is_background_task(body["messages"])
    model = body.get("model")

    async def sees_images() -> bool:
        if settings.vision == "auto":
            return await upstream.supports_vision(model)
        return settings.vision == "on"

    async def context_tokens() -> int:
        # LM Studio says what the loaded model has; elsewhere the setting stands in.
        return (await upstream.context_lengths()).get(model or "") or settings.context_tokens

    async def tool_budget(
        messages: list[dict[str, Any]], mcp_tools: Sequence[dict[str, Any]], client_tools: Sequence[dict[str, Any]]
    ) -> BudgetChoice | None:
        budget = await tool_budget_for(settings, upstream, model)
        choice = choose_within(mcp_tools, client_tools, messages, budget)
        if choice is not None and choice.withheld:
            log.info("tools_withheld", offered=len(choice.kept), withheld=list(choice.withheld),
                     budget=settings.tool_budget or None, max_chars=budget.max_chars)
        return choice

    return LoopOptions(
        max_tool_rounds=settings.max_tool_rounds,
        system_hint=system_hint(settings.result_format) if settings.system_hint else None,
        sees_images=sees_images,
        offer_tools=not background_task,
        tool_selection=selection,
        tool_budget=tool_budget,
        context_tokens=context_tokens,
    )


async def tool_budget_for(settings: Settings, upstream: ModelFacts, model: str | None) -> Budget:
    """The tool budget for a model. The context's share applies when the upstream says what the context is;
    TOOLBRIDGE_CONTEXT_TOKENS is only a guess."""
    known = (await upstream.context_lengths()).get(model or "")
    return budget_for(settings.tool_budget or UNLIMITED, known, settings.rank_client_tools)


def conversation_memory(
    settings: Settings, stores: MemoryStores | None, headers: Mapping[str, str]
) -> ConversationMemory:
    """The request's memory: the API key's own (every caller's when no keys are set), narrowed to Open
    WebUI's chat when it names one."""
    rendering = RenderOptions(result_format=settings.result_format, max_chars=settings.max_result_chars)
    owner = memory_owner(_api_key(headers) if settings.client_keys else None)
    return ConversationMemory(stores, rendering, chat_id=chat_id(headers), owner=owner)


def _api_key(headers: Mapping[str, str]) -> str:
    """The bearer key the request came with: the guard (app/api/guard.py) let it in only if it is one of ours."""
    scheme, _, presented = headers.get("authorization", "").partition(" ")
    return presented.strip() if scheme.lower() == "bearer" else ""
