"""Traces as a collector receives them: the gateway started as users start it, exporting over OTLP/HTTP to
a receiver in this test that decodes the protobuf the way a collector does."""

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.conftest import stdio_entry, wait_for_health
from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.support.servers import ServerThread, free_port
from tests.test_cli import EXIT_TIMEOUT, TOOLBRIDGE, clean_env, write_config

PRIVATE = "PRIVATE-USER-TEXT"


class Collector:
    def __init__(self) -> None:
        self.spans: list[Any] = []

        async def traces(request: Request) -> Response:
            export = ExportTraceServiceRequest.FromString(await request.body())
            for resource in export.resource_spans:
                for scope in resource.scope_spans:
                    self.spans.extend(scope.spans)
            return Response(ExportTraceServiceRequest().SerializeToString(), media_type="application/x-protobuf")

        self.app = Starlette(routes=[Route("/v1/traces", traces, methods=["POST"])])


@pytest.fixture
def collector() -> Iterator[tuple[Collector, str]]:
    received = Collector()
    with ServerThread(received.app) as thread:
        yield received, thread.url


def attributes(span: Any) -> dict[str, Any]:
    def value(v: Any) -> Any:
        kind = v.WhichOneof("value")
        return [value(x) for x in v.array_value.values] if kind == "array_value" else getattr(v, kind)

    return {a.key: value(a.value) for a in span.attributes}


def test_a_chat_with_a_tool_call_is_one_trace_without_content(
    tmp_path: Path, upstream: FakeUpstream, collector: tuple[Collector, str]
) -> None:
    received, collector_url = collector
    config = write_config(tmp_path, {"basic": stdio_entry("basic.py")})
    port = free_port()
    env = clean_env() | {"TOOLBRIDGE_UPSTREAM_URL": f"{upstream.url}/v1", "TOOLBRIDGE_OTEL": "true",
                         "OTEL_EXPORTER_OTLP_ENDPOINT": collector_url}
    gateway = subprocess.Popen([TOOLBRIDGE, "--port", str(port), "--mcp-config", str(config)], cwd=tmp_path,
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_health(f"http://127.0.0.1:{port}", lambda b: b["servers"]["basic"]["state"] == "ready")
        upstream.script(Turn(calls=[Call("echo", {"text": PRIVATE})], usage=(11, 3)),
                        Turn(content=f"echoed {PRIVATE}", usage=(20, 4)))
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
        client.chat.completions.create(model="qwen3-8b", messages=[{"role": "user", "content": PRIVATE}])
    finally:
        gateway.send_signal(signal.SIGTERM)  # the exporter flushes at shutdown
        assert gateway.wait(timeout=EXIT_TIMEOUT) == 0

    by_name = {span.name: span for span in received.spans}
    chat, tool = by_name["chat qwen3-8b"], by_name["execute_tool echo"]
    assert attributes(chat) | {"toolbridge.stream": False} == {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "qwen3-8b", "toolbridge.stream": False,
        "toolbridge.tool_rounds": 2, "gen_ai.response.finish_reasons": ["stop"],
        "gen_ai.usage.input_tokens": 31, "gen_ai.usage.output_tokens": 7,
    }
    assert attributes(tool)["gen_ai.tool.name"] == "echo"
    assert attributes(tool)["gen_ai.operation.name"] == "execute_tool"
    assert tool.trace_id == chat.trace_id and tool.parent_span_id == chat.span_id
    # The mcp SDK's own span of the tools/call request nests under the tool call.
    assert any(s.parent_span_id == tool.span_id and s.trace_id == chat.trace_id for s in received.spans)
    assert PRIVATE not in str(received.spans)

