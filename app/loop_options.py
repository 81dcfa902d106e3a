"""What one chat request makes of the tool loop, from the settings and the request: how many tool rounds,
the system hint, whether MCP tools are offered at all (not for Open WebUI's background tasks), whether
the model is shown the images tools return, which tools its user selected, the model's context, and the
conversation's memory."""

from collections.abc import Mapping
from typing import Any, Protocol

from app.mcp.results import RenderOptions, system_hint
from app.memory import ConversationMemory, MemoryStores
from app.open_webui import chat_id, is_background_task
from app.ports import ALL_TOOLS, LoopOptions, ToolSelection
from app.settings import Settings


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

    return LoopOptions(
        max_tool_rounds=settings.max_tool_rounds,
        system_hint=system_hint(settings.result_format) if settings.system_hint else None,
        sees_images=sees_images,
        offer_tools=not background_task,
        tool_selection=selection,
        context_tokens=context_tokens,
    )


def conversation_memory(
    settings: Settings, stores: MemoryStores | None, headers: Mapping[str, str]
) -> ConversationMemory:
    """The request's memory, narrowed to Open WebUI's chat when it names one."""
    rendering = RenderOptions(result_format=settings.result_format, max_chars=settings.max_result_chars)
    return ConversationMemory(stores, rendering, chat_id=chat_id(headers))
