"""The tools group: what a request is offered of the MCP tools, how their results read to the model, and how the
tool work and its images are shown to people."""

from typing import Literal

from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt

from app.settings.checks import Group, Toolsets
from app.settings.vocabularies import PrefixMode, ProfileSetting, ResultFormat, ToolDiscovery, TraceMode

TOOL_BUDGET_DEFAULT = 24  # the smallest that left the eval's 22 tools whole: below it both models lost tasks
MIN_MCP_TOOLS_DEFAULT = 4  # the eval's Open WebUI tasks at an 8k context: 4 passed 6/11, 8 passed 4/11 (docs/eval.md)


class ToolSettings(Group):
    """The tool loop's rounds, the tools' names and schemas, the budget, results, the trace and images."""

    max_tool_rounds: PositiveInt = Field(
        default=8, description="Tool rounds before the model is asked to answer without calling tools."
    )
    tool_prefix: PrefixMode = Field(
        default="on-conflict",
        description="Prefix tool names with their server only where two servers (or a server and "
        "a client tool) clash, or always."
    )
    schema_profile: ProfileSetting = Field(
        default="auto",
        description="How tool schemas are rewritten: lmstudio/llamacpp make them grammar-safe; auto does so "
        "for every upstream but OpenAI's API, which gets openai (strict)."
    )
    result_format: ResultFormat = Field(
        default="envelope", description="Tool results as a JSON envelope with status, data and meta, or as plain text."
    )
    max_result_chars: int = Field(
        default=25_000, ge=1_000, description="Characters one tool result may take in the conversation; more is cut."
    )
    system_hint: bool = Field(
        default=True,
        description="Add a short note on reading tool results to the system message when tools are offered."
    )
    skip_tools_for_tasks: bool = Field(
        default=True, description="Offer no tools to Open WebUI's background task prompts (titles, tags, follow-ups)."
    )
    tool_budget: NonNegativeInt = Field(
        default=TOOL_BUDGET_DEFAULT,
        description="The most MCP tools one request is offered: past it, or past half of the model's context, the "
        "tools most relevant to the conversation are kept (and those it called or the user named). 0: no budget, "
        "every tool offered whatever the context.",
    )
    min_mcp_tools: NonNegativeInt = Field(
        default=MIN_MCP_TOOLS_DEFAULT,
        description="The most relevant MCP tools offered whatever the context's room, so a client that sends many "
        "tools of its own (Open WebUI: 36) never leaves the model none of ours; the client's tools are then sent "
        "compact if they do not fit beside them.",
    )
    tool_order: Literal["configured", "relevance"] = Field(
        default="configured",
        description="The order of the tools the budget keeps: as the servers and mcp.json list them "
        "(the same from turn to turn while the same tools are kept, so the model server's prompt cache holds), or "
        "the most relevant first (docs/eval.md: no clear gain for SmolLM2)."
    )
    tool_discovery: ToolDiscovery = Field(
        default="off",
        description="find_tools: when the budget would leave MCP tools out, offer the model one find_tools "
        "tool instead of them (beside the tools it called or the user named); its call names the few that match the "
        "need, whose definitions the request offers from then on.",
    )
    rank_client_tools: bool = Field(
        default=False,
        description="Rank the client's own tools (Open WebUI sends 36) with the MCP tools under the budget, "
        "instead of always offering them all."
    )
    toolsets: Toolsets = Field(
        default_factory=dict,
        description='Named sets of MCP tools, as JSON: {"clock": ["time"], "files": ["fs", "fetch"]} (server names, '
        "or tool names as offered). /v1/models then also lists MODEL+NAME for every model, which offers only "
        "those tools.",
    )
    tool_trace: TraceMode = Field(
        default="reasoning",
        description="How tool work is shown: as reasoning, Open WebUI tool blocks, text lines, or not at all. "
        "A request can choose with the header X-Toolbridge-Trace.",
    )
    show_user_content: bool = Field(
        default=True,
        description="Show the person, in the answer, the images tool results return and the content a server "
        "addresses to the user alone, in every trace mode (the model's view does not change)."
    )
    image_store_mb: PositiveFloat = Field(
        default=64.0,
        description="Megabytes the images served to browsers may take in all; the oldest go first, and one "
        "image may take a quarter."
    )
    image_max_age_hours: PositiveFloat = Field(
        default=24.0, description="Hours an image's link in an answer works (also until the gateway restarts)."
    )
    image_inline_bytes: NonNegativeInt = Field(
        default=16_384,
        description="Images up to this size go into Open WebUI's tool widget (details trace) as data: URLs, "
        "which last as long as the chat; larger ones are linked. 0: always linked."
    )
