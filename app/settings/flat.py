"""The settings as people spell them: every TOOLBRIDGE_* variable and --flag by its flat name, the field of a group
each stands for, and the flat model that reads them (flags, the environment, .env) with each field's own default,
check and description. Listed in the order `toolbridge --help` shows them."""

from copy import copy
from typing import Any, TypeVar

from pydantic import BaseModel, create_model
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.settings.access import AccessSettings
from app.settings.approvals import ApprovalSettings
from app.settings.mcp import McpSettings
from app.settings.ops import OpsSettings
from app.settings.server import ServerSettings
from app.settings.state import StateSettings
from app.settings.tools import ToolSettings
from app.settings.upstream import UpstreamSettings

GROUPS: dict[str, type[BaseModel]] = {
    "server": ServerSettings, "upstream": UpstreamSettings, "mcp": McpSettings, "tools": ToolSettings,
    "state": StateSettings, "approvals": ApprovalSettings, "access": AccessSettings, "ops": OpsSettings,
}

# flat name: (group, field). A new setting goes into its group's module and here.
FLAT_NAMES: dict[str, tuple[str, str]] = {
    "upstream_url": ("upstream", "url"),
    "upstream_api_key": ("upstream", "api_key"),
    "upstream_transport": ("upstream", "transport"),
    "upstream_timeout": ("upstream", "timeout"),
    "mcp_config": ("mcp", "config"),
    "host": ("server", "host"),
    "port": ("server", "port"),
    "api_keys": ("access", "api_keys"),
    "keys_file": ("access", "keys_file"),
    "allowed_hosts": ("server", "allowed_hosts"),
    "cors_origins": ("server", "cors_origins"),
    "max_body_bytes": ("server", "max_body_bytes"),
    "client_timeout": ("server", "client_timeout"),
    "max_concurrent_requests": ("server", "max_concurrent_requests"),
    "metrics_public": ("access", "metrics_public"),
    "max_tool_rounds": ("tools", "max_tool_rounds"),
    "confirm": ("approvals", "confirm"),
    "confirm_timeout": ("approvals", "confirm_timeout"),
    "tool_timeout": ("mcp", "tool_timeout"),
    "tool_timeout_max": ("mcp", "tool_timeout_max"),
    "task_wait": ("mcp", "task_wait"),
    "watch_config": ("mcp", "watch_config"),
    "sampling": ("mcp", "sampling"),
    "sampling_model": ("mcp", "sampling_model"),
    "block_changed_tools": ("mcp", "block_changed_tools"),
    "pin_tools": ("mcp", "pin_tools"),
    "notify_url": ("ops", "notify_url"),
    "notify_format": ("ops", "notify_format"),
    "notify_after": ("ops", "notify_after"),
    "notify_values": ("ops", "notify_values"),
    "mcp_connect_timeout": ("mcp", "connect_timeout"),
    "mcp_start_wait": ("mcp", "start_wait"),
    "shutdown_grace": ("server", "shutdown_grace"),
    "tool_prefix": ("tools", "tool_prefix"),
    "schema_profile": ("tools", "schema_profile"),
    "result_format": ("tools", "result_format"),
    "max_result_chars": ("tools", "max_result_chars"),
    "mcp_message_mb": ("mcp", "message_mb"),
    "resource_tools": ("mcp", "resource_tools"),
    "prompt_commands": ("mcp", "prompt_commands"),
    "ui_show_values": ("ops", "ui_show_values"),
    "vision": ("upstream", "vision"),
    "system_hint": ("tools", "system_hint"),
    "skip_tools_for_tasks": ("tools", "skip_tools_for_tasks"),
    "tool_budget": ("tools", "tool_budget"),
    "min_mcp_tools": ("tools", "min_mcp_tools"),
    "tool_order": ("tools", "tool_order"),
    "tool_discovery": ("tools", "tool_discovery"),
    "rank_client_tools": ("tools", "rank_client_tools"),
    "toolsets": ("tools", "toolsets"),
    "tool_trace": ("tools", "tool_trace"),
    "show_user_content": ("tools", "show_user_content"),
    "public_url": ("server", "public_url"),
    "image_store_mb": ("tools", "image_store_mb"),
    "image_max_age_hours": ("tools", "image_max_age_hours"),
    "image_inline_bytes": ("tools", "image_inline_bytes"),
    "state_url": ("state", "url"),
    "token_key": ("state", "token_key"),
    "state_max_mb": ("state", "max_mb"),
    "state_max_age_days": ("state", "max_age_days"),
    "context_tokens": ("upstream", "context_tokens"),
    "otel": ("ops", "otel"),
    "log_format": ("ops", "log_format"),
    "log_level": ("ops", "log_level"),
}


class FlatSettingsBase(BaseSettings):
    """Where the flat names are read from: TOOLBRIDGE_* variables and .env (flags: the CLI's subclass)."""

    model_config = SettingsConfigDict(
        env_prefix="TOOLBRIDGE_", env_file=".env", env_ignore_empty=True, extra="ignore"
    )


Base = TypeVar("Base", bound=BaseSettings)


def field_of(flat_name: str) -> FieldInfo:
    """The group's field a flat name stands for: its type, default, checks and description."""
    group, field = FLAT_NAMES[flat_name]
    return GROUPS[group].model_fields[field]


def with_every_setting(base: type[Base], name: str) -> type[Base]:
    """`base`, as `name`, with a field for every flat name, each its group field's copy: one source for both
    spellings."""
    # Splatted into create_model, whose own keywords (__config__, ...) no narrower type than Any's values passes.
    fields: dict[str, Any] = {}
    for name in FLAT_NAMES:
        info = field_of(name)
        fields[name] = (info.annotation, copy(info))
    return create_model(name, __base__=base, __module__=base.__module__, **fields)


FlatSettings = with_every_setting(FlatSettingsBase, "FlatSettings")


def grouped(flat: BaseSettings) -> dict[str, dict[str, object]]:
    """A flat model's values by group and field, for the grouped settings."""
    values: dict[str, dict[str, object]] = {group: {} for group in GROUPS}
    for name, (group, field) in FLAT_NAMES.items():
        values[group][field] = getattr(flat, name)
    return values
