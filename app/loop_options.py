"""What one chat request makes of the tool loop, from the settings and the request: how many tool rounds,
the system hint, whether MCP tools are offered at all (not for Open WebUI's background tasks), and
whether the model is shown the images tools return, and how earlier calls a client's history recorded are
shown to it again."""

from typing import Any, Protocol

from app.mcp.results import RenderOptions, system_hint
from app.mcp.results import recorded_result as render_recorded
from app.open_webui import is_background_task
from app.ports import LoopOptions
from app.settings import Settings
from app.trace import RecordedCall


class VisionSource(Protocol):
    async def supports_vision(self, model: str | None) -> bool: ...


def loop_options(settings: Settings, body: dict[str, Any], upstream: VisionSource) -> LoopOptions:
    background_task = settings.skip_tools_for_tasks and is_background_task(body["messages"])

    async def sees_images() -> bool:
        if settings.vision == "auto":
            return await upstream.supports_vision(body.get("model"))
        return settings.vision == "on"

    rendering = RenderOptions(result_format=settings.result_format, max_chars=settings.max_result_chars)

    def recorded_result(call: RecordedCall) -> str:
        return render_recorded(call.result, call.failed, call.cut, rendering)

    return LoopOptions(
        max_tool_rounds=settings.max_tool_rounds,
        system_hint=system_hint(settings.result_format) if settings.system_hint else None,
        sees_images=sees_images,
        offer_tools=not background_task,
        recorded_result=recorded_result,
    )
