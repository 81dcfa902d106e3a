"""The operations group: what people and monitors read of the running gateway: its log, traces, recent calls."""

from typing import Literal

from pydantic import Field, PositiveFloat, SecretStr

from app.settings.checks import Group, LogLevel


class OpsSettings(Group):
    """TOOLBRIDGE_UI_SHOW_VALUES, TOOLBRIDGE_OTEL, TOOLBRIDGE_LOG_* and TOOLBRIDGE_NOTIFY_*."""

    ui_show_values: bool = Field(
        default=False, description="Keep the arguments and results of the recent tool calls for /ui/calls (they may be "
        "private, and a tool's error message often repeats them; off keeps the tool, the time, the outcome and the "
        "error's class)."
    )
    otel: bool = Field(
        default=False,
        description="Send OpenTelemetry traces (a span per chat request and per tool call, no message content) "
        "over OTLP to OTEL_EXPORTER_OTLP_ENDPOINT. Needs the otel extra.",
    )
    log_format: Literal["console", "json"] = Field(default="console", description="Log lines for people or machines.")
    log_level: LogLevel = Field(default="info", description="Lowest level logged.")
    notify_url: SecretStr | None = Field(
        default=None, description="A webhook that hears when someone must act: a call waited for the person's yes "
        "longer than TOOLBRIDGE_NOTIFY_AFTER, a server needs a sign-in, a tool's definition changed since it was "
        "pinned. Its address is a secret (a Slack webhook's is): never logged.",
    )
    notify_format: Literal["json", "slack"] = Field(
        default="json", description='The webhook\'s body: json (the event, its words as "text", the server, the tool '
        'and a link to the status page) or slack ({"text": ...} alone, for Slack-compatible incoming webhooks).',
    )
    notify_after: PositiveFloat = Field(
        default=300.0, description="Seconds a call waits for the person's yes before the webhook hears of it."
    )
    notify_values: bool = Field(
        default=False, description="Put a waiting call's argument values in the webhook's notice (off: the tool and "
        "server alone)."
    )
