"""The approvals group: which MCP tool calls wait for the person's yes, and how long a question waits."""

from pydantic import Field, PositiveFloat

from app.settings.checks import Group
from app.settings.vocabularies import ConfirmPolicy


class ApprovalSettings(Group):
    """TOOLBRIDGE_CONFIRM and TOOLBRIDGE_CONFIRM_TIMEOUT."""

    confirm: ConfirmPolicy = Field(
        default="destructive", description="MCP tool calls that wait for the person's yes: off, destructive (annotated "
        'destructiveHint: true), writes (not annotated readOnlyHint: true), all. mcp.json\'s "confirm" wins.'
    )
    confirm_timeout: PositiveFloat = Field(
        default=3600.0,
        description="Seconds a call that asks first waits for the person's yes; a later yes does not run it."
    )
