"""The MCP group: the mcp.json files, and how the gateway starts, calls and listens to the servers they list."""

from pydantic import Field, NonNegativeFloat, PositiveFloat

from app.settings.checks import Group, PathsText


class McpSettings(Group):
    """TOOLBRIDGE_MCP_*, the tool calls' time limits, reloads, sampling, resources and prompts."""

    config: PathsText = Field(
        default="mcp.json",
        description="The mcp.json files listing the MCP servers, comma-separated; later files win. "
        "The word lmstudio stands for LM Studio's own mcp.json.",
    )
    tool_timeout: PositiveFloat = Field(
        default=60.0, description="Seconds a tool call may go without finishing or reporting progress."
    )
    tool_timeout_max: PositiveFloat = Field(
        default=600.0, description="Seconds a tool call may take at most, however often it reports progress."
    )
    task_wait: NonNegativeFloat = Field(
        default=10.0, description="Seconds to wait for a tool that its server runs as an MCP task before the answer "
        "goes on without it; the task keeps running and its result reaches the model in a later turn of the chat."
    )
    watch_config: bool = Field(
        default=False,
        description="Apply changes to the mcp.json files as soon as they are saved (SIGHUP always works)."
    )
    sampling: bool = Field(
        default=True,
        description="Answer MCP servers' sampling requests (sampling/createMessage) with the upstream model."
    )
    sampling_model: str = Field(
        default="", description="Model for sampling requests when the server names none; empty: the upstream's default."
    )
    block_changed_tools: bool = Field(
        default=False, description="Stop offering a tool whose definition a server changes, until the gateway restarts."
    )
    pin_tools: bool = Field(
        default=True, description="Pin each tool's definition when first seen (kept over restarts); a tool whose "
        "server changes it asks before every call, whatever the grants, until accepted on the status page."
    )
    connect_timeout: PositiveFloat = Field(
        default=60.0, description="Seconds an MCP server may take to start and list its tools."
    )
    start_wait: NonNegativeFloat = Field(
        default=10.0,
        description="Seconds a chat waits for MCP servers still starting "
        "(after the gateway starts, or a reload adds one), then goes on without their tools and its trace names them.",
    )
    message_mb: PositiveFloat = Field(
        default=16.0, description="Megabytes one message from a stdio MCP server may take (a tool result, a resource); "
        "a call answered with more fails with an error saying so, and the gateway never holds it."
    )
    resource_tools: bool = Field(
        default=True,
        description="Offer a SERVER__read_resource tool for each MCP server with resources: the model reads "
        "them (and links in tool results) by URI."
    )
    prompt_commands: bool = Field(
        default=True, description="Run MCP prompts typed as a chat message: /name arg=value. /prompts lists them."
    )
