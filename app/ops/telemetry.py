"""Optional OpenTelemetry traces: one span per chat request and one per tool call, named and attributed by
the GenAI semantic conventions, never with message content, arguments or results.

The API is always there (the mcp SDK uses it, and carries the trace context to MCP servers in `_meta`);
without an SDK every span is a no-op. `start_tracing` installs the SDK from the `otel` extra with an OTLP
exporter configured by the standard OTEL_* variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME...).
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

from opentelemetry import trace
from opentelemetry.trace import Span as Span  # re-exported: the loop names its spans without importing opentelemetry
from opentelemetry.trace import SpanKind, Status, StatusCode

_tracer = trace.get_tracer("toolbridge")


class TracingUnavailable(Exception):
    """TOOLBRIDGE_OTEL is on but the otel extra is not installed."""


def start_tracing(version: str) -> Callable[[], None]:
    """Installs the SDK's tracer provider with a batching OTLP/HTTP exporter; returns its shutdown (which
    flushes what is left). Raises TracingUnavailable without the otel extra."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:  # the optional extra: only imported when asked for
        raise TracingUnavailable(
            "TOOLBRIDGE_OTEL needs the otel extra: pip install 'toolbridge[otel]'"
        ) from exc
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: "toolbridge", SERVICE_VERSION: version}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider.shutdown


def start_chat_span(model: str | None, streamed: bool) -> Span:
    """The span of one chat completion, from the first upstream request to the last tool round. Not made
    current: it lives in a generator that crosses tasks; tool spans name it as their parent instead."""
    return _tracer.start_span(
        f"chat {model or ''}".strip(),
        kind=SpanKind.CLIENT,
        attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": model or "",
                    "toolbridge.stream": streamed},
    )


class TokenUsage(Protocol):
    """A request's tokens, summed over its rounds (app/openai/accumulate.py's Usage)."""

    @property
    def prompt_tokens(self) -> int: ...
    @property
    def completion_tokens(self) -> int: ...


def end_chat_span(
    span: Span, *, rounds: int, finish_reason: str | None, usage: TokenUsage | None, error: BaseException | None = None
) -> None:
    if not span.is_recording():  # a no-op span (no SDK, or not sampled) keeps nothing of what is set on it
        span.end()
        return
    span.set_attribute("toolbridge.tool_rounds", rounds)
    if finish_reason:
        span.set_attribute("gen_ai.response.finish_reasons", [finish_reason])
    if usage is not None:
        span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)
    if error is not None:
        span.set_attribute("error.type", type(error).__name__)
        span.set_status(Status(StatusCode.ERROR))
    span.end()


@contextmanager
def tool_span(parent: Span, name: str, call_id: str) -> Iterator[Span]:
    """The span of one tool call, current while it runs so the mcp SDK's own span nests under it."""
    if not _tracing():
        # The API's no-op tracer would hand back `parent` and make it current, which it already is: the same,
        # without the attributes and the context's attach and detach (with end_chat_span's, 60 Python calls a round).
        yield parent
        return
    with _tracer.start_as_current_span(
        f"execute_tool {name}",
        context=trace.set_span_in_context(parent),
        kind=SpanKind.INTERNAL,
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                    "gen_ai.tool.call.id": call_id, "gen_ai.tool.type": "function"},
    ) as span:
        yield span


def _tracing() -> bool:
    """Whether a tracer provider was installed (ours, or the OTel distro's): otherwise every span is a no-op."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def tool_failed(span: Span, kind: str) -> None:
    span.set_attribute("error.type", kind)
    span.set_status(Status(StatusCode.ERROR))
