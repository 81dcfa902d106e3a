"""Every setting of the gateway, in groups: TOOLBRIDGE_* environment variables, a .env file, and matching flags,
each read by its flat name (`flat.py`) into the field of its group (`settings.upstream.url`). A component is given
its group: the upstream's, the state store's, the server's."""


from urllib.parse import urlsplit

from pydantic import Field

# A leaf: nothing from app but its groups, vocabularies and checks, so reading a setting imports no SDK and no
# HTTP client.
from app.settings.access import AccessSettings
from app.settings.approvals import ApprovalSettings
from app.settings.checks import Group
from app.settings.flat import FLAT_NAMES, FlatSettings, FlatSettingsBase, field_of, grouped, with_every_setting
from app.settings.mcp import McpSettings
from app.settings.ops import OpsSettings
from app.settings.server import ServerSettings
from app.settings.state import StateSettings
from app.settings.tools import MIN_MCP_TOOLS_DEFAULT, TOOL_BUDGET_DEFAULT, ToolSettings
from app.settings.upstream import UpstreamSettings

SECRET_SETTINGS = frozenset({"api_keys", "upstream_api_key", "token_key", "notify_url"})  # by their flat names

__all__ = [
    "FLAT_NAMES", "MIN_MCP_TOOLS_DEFAULT", "SECRET_SETTINGS", "TOOL_BUDGET_DEFAULT", "AccessSettings",
    "ApprovalSettings", "FlatSettings", "FlatSettingsBase", "McpSettings", "OpsSettings", "ServerSettings",
    "Settings", "StateSettings", "ToolSettings", "UpstreamSettings", "field_of", "with_every_setting",
]


class Settings(Group):
    """Gateway settings in groups. Read them with `Settings.load()` (the environment and .env, and flat names
    given in code) and pass them to `create_app`; nothing reads a global."""

    server: ServerSettings = Field(default_factory=ServerSettings)
    upstream: UpstreamSettings = Field(default_factory=UpstreamSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    state: StateSettings = Field(default_factory=StateSettings)
    approvals: ApprovalSettings = Field(default_factory=ApprovalSettings)
    access: AccessSettings = Field(default_factory=AccessSettings)
    ops: OpsSettings = Field(default_factory=OpsSettings)

    @classmethod
    def load(cls, **flat: object) -> "Settings":
        """The settings from the environment and .env, and these flat names (`upstream_url=...`, `_env_file=None`)
        over them.

        Raises:
            pydantic.ValidationError: a value fails its check; the error's location is the flat name.
        """
        return cls.from_flat(FlatSettings(**flat))

    @classmethod
    def from_flat(cls, flat: FlatSettingsBase) -> "Settings":
        """The settings a flat model read (`FlatSettings`, or the CLI's own with its flags)."""
        return cls.model_validate(grouped(flat))

    def secrets(self) -> list[str]:
        """Every secret value the settings hold, for the log to redact."""
        upstream = self.upstream.api_key.get_secret_value() if self.upstream.api_key else ""
        state_password = urlsplit(self.state.url).password or ""  # redis://:PASSWORD@host
        notify = self.ops.notify_url.get_secret_value() if self.ops.notify_url else ""
        return [upstream, state_password, self.state.secret_key or "", notify, *self.access.client_keys]
