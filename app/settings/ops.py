"""The operations group: what people and monitors read of the running gateway: its log, traces, recent calls."""

from typing import Literal

from pydantic import Field

from app.settings.checks import Group, LogLevel


class OpsSettings(Group):
    """TOOLBRIDGE_UI_SHOW_VALUES, TOOLBRIDGE_OTEL and TOOLBRIDGE_LOG_*."""

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
