"""What one chat request makes of the tool loop, from the settings and the request: how many tool rounds,
the system hint, whether MCP tools are offered at all (not for Open WebUI's background tasks), whether
the model is shown the images tools return, which tools its user selected, the model's context, and the
conversation's memory."""

from collections.abc import Awaitable, Callable, Sequence
from functools import partial

import anyio
import structlog

from app.chat.clients import is_background_task
from app.chat.memory import ConversationMemory, MemoryStores, memory_owner
from app.chat.offer import (
    Budget,
    all_fit,
    budget_for,
    choose_in_conversation,
    kept_ranking,
    ranking_of,
    why_withheld,
)
from app.chat.ports import ALL_TOOLS, BudgetChoice, LoopOptions, ModelFacts, RequestTools, ToolSelection
from app.chat.turn import Caller, Turn
from app.openai.result_format import RenderOptions, system_hint
from app.openai.wire import Message, Tool
from app.ops.recent_requests import RecentRequests
from app.settings import Settings

log = structlog.get_logger("toolbridge.tools")

LOGGED_NAMES = 50  # of the tools withheld, in the log line that says so (best first)
DEFAULT_CONTEXT_TOKENS = 8192  # to fit restored results in, when neither the upstream nor the settings say

# The tools to offer when the budget leaves some out: (history, MCP tools, client tools) -> choice, or None.
ToolBudget = Callable[[list[Message], RequestTools, Sequence[Tool]], Awaitable[BudgetChoice | None]]


def loop_options(
    settings: Settings, turn: Turn, upstream: ModelFacts, selection: ToolSelection = ALL_TOOLS,
    recent: RecentRequests | None = None,
) -> LoopOptions:
    background_task = settings.tools.skip_tools_for_tasks and is_background_task(turn.messages)
    model = turn.model

    async def sees_images() -> bool:
        if settings.upstream.vision == "auto":
            return await upstream.supports_vision(model)
        return settings.upstream.vision == "on"

    async def context_tokens() -> int:
        return await known_context(settings, upstream, model) or DEFAULT_CONTEXT_TOKENS

    return LoopOptions(
        max_tool_rounds=settings.tools.max_tool_rounds,
        system_hint=system_hint(settings.tools.result_format) if settings.tools.system_hint else None,
        sees_images=sees_images,
        offer_tools=not background_task,
        tool_selection=selection,
        tool_budget=_tool_budget(settings, upstream, model, recent),
        context_tokens=context_tokens,
        confirm_timeout=settings.approvals.confirm_timeout,
        find_tools=_rendering(settings) if settings.tools.tool_discovery == "find_tools" else None,
    )


def _tool_budget(
    settings: Settings, upstream: ModelFacts, model: str | None, recent: RecentRequests | None
) -> ToolBudget:
    """The request's tool budget, asked once the history and the tools are known; what it withholds is said
    in a log line and kept among the recent requests."""

    async def tool_budget(
        messages: Sequence[Message], mcp_tools: RequestTools, client_tools: Sequence[Tool],
    ) -> BudgetChoice | None:
        budget = await tool_budget_for(settings, upstream, model)
        choice = None if budget is None else await _choose(mcp_tools, client_tools, messages, budget)
        why = ""
        if budget is not None and choice is not None and (choice.withheld or choice.compacted_client_tools):
            why = _say_withheld(choice, budget, client_tools)
        if recent is not None:
            offered = len(mcp_tools.openai_tools) + len(client_tools) if choice is None else len(choice.kept)
            recent.add(model, offered, () if choice is None else choice.withheld, why)
        return choice

    return tool_budget


async def _choose(mcp_tools: RequestTools, client_tools: Sequence[Tool], messages: Sequence[Message],
                  budget: Budget) -> BudgetChoice | None:
    """The budget's choice. A request whose tools' ranking data its catalogue keeps (built with the catalogue, or by
    an earlier request of the same toolset) only scores and picks, here; one that would work data out first (a
    part of the catalogue new to it, the client's tools ranked with ours: 35-50 ms of indexing at 1,000 tools) does
    it in a worker thread, so that no other request waits for it. Tools that all fit, with no data kept for them (a
    catalogue within the budget's count: prepare_ranking), need none: weighed as they are, nothing is worked out and
    bm25s is not imported."""
    kept = kept_ranking(mcp_tools)
    if kept is not None and not (budget.rank_client_tools and client_tools):
        return choose_in_conversation(kept, client_tools, messages, budget)
    if kept is None and all_fit(mcp_tools.openai_tools, client_tools, budget):
        return None
    return await anyio.to_thread.run_sync(partial(_choose_anew, mcp_tools, client_tools, messages, budget))


def _choose_anew(mcp_tools: RequestTools, client_tools: Sequence[Tool], messages: Sequence[Message],
                 budget: Budget) -> BudgetChoice | None:
    return choose_in_conversation(ranking_of(mcp_tools), client_tools, messages, budget)


def _say_withheld(choice: BudgetChoice, budget: Budget, client_tools: Sequence[Tool]) -> str:
    """Why tools were withheld, in words, and logged as a warning: a person wonders why the model "cannot
    see" a tool; this line says."""
    why = why_withheld(choice, budget, client_tools)
    # The best of those left out: with 1,000 tools mounted, all their names made 12 % of a request's time.
    log.warning("tools_withheld", withheld=len(choice.withheld), why=why, offered=len(choice.kept),
                names=list(choice.withheld[:LOGGED_NAMES]), client_tools=len(client_tools),
                client_tools_compacted=len(choice.compacted_client_tools or ()))
    return why


async def known_context(settings: Settings, upstream: ModelFacts, model: str | None) -> int | None:
    """The model's context window in tokens: TOOLBRIDGE_CONTEXT_TOKENS when set (the operator knows best), else
    what the upstream reports (LM Studio's loaded context, llama.cpp's n_ctx); None when nobody says."""
    return settings.upstream.context_tokens or await upstream.context_length(model)


async def tool_budget_for(settings: Settings, upstream: ModelFacts, model: str | None) -> Budget | None:
    """The tool budget for a model; None for TOOLBRIDGE_TOOL_BUDGET=0, which offers every tool. The context's
    share applies when the context is known: a guessed one never withholds a tool."""
    if not settings.tools.tool_budget:
        return None
    known = await known_context(settings, upstream, model)
    return budget_for(settings.tools.tool_budget, known, settings.tools.rank_client_tools, settings.tools.min_mcp_tools,
                      relevance_order=settings.tools.tool_order == "relevance")


def conversation_memory(
    settings: Settings, stores: MemoryStores | None, caller: Caller
) -> ConversationMemory:
    """The request's memory: the API key's own (every caller's when no keys are set), narrowed to Open
    WebUI's chat when it names one."""
    owner = memory_owner(caller.api_key if settings.access.authenticates else None)
    return ConversationMemory(stores, _rendering(settings), chat_id=caller.chat_id, owner=owner)


def _rendering(settings: Settings) -> RenderOptions:
    """How results are written for the model: memory's restored ones, and find_tools' answers."""
    return RenderOptions(result_format=settings.tools.result_format, max_chars=settings.tools.max_result_chars)
