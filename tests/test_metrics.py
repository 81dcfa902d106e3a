"""GET /metrics as Prometheus scrapes it: what a chat with a tool call leaves there, and who may read it."""

from pathlib import Path

import httpx
import openai
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import running_gateway, stdio_entry
from tests.support.fake_upstream import Call, FakeUpstream, Turn

KEY = {"Authorization": "Bearer k1"}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_a_chat_with_a_tool_call_is_counted(tmp_path: Path, upstream: FakeUpstream) -> None:
    servers = {"basic": stdio_entry("basic.py"), "broken": stdio_entry("crash_on_start.py")}
    with running_gateway(tmp_path, servers, ready=("basic",), key="k1", upstream_url=f"{upstream.url}/v1",
                         api_keys="k1") as gateway:
        upstream.script(Turn(calls=[Call("basic__echo", {"text": "x"})], usage=(11, 3)),
                        Turn(content="done", usage=(20, 4)))
        client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="k1", max_retries=0)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert httpx.get(f"{gateway.url}/metrics").status_code == 401
        for method in ("PROPFIND", "MKCOL", "LOCK"):  # methods the HTTP parser passes on: one label for them all
            httpx.request(method, f"{gateway.url}/tools", headers=KEY)
        scraped = httpx.get(f"{gateway.url}/metrics", headers=KEY)
    assert scraped.headers["content-type"].startswith("text/plain")
    seen = samples(scraped.text)
    chat = (("method", "POST"), ("route", "/v1/chat/completions"), ("status", "200"))
    assert seen[("toolbridge_requests_total", chat)] == 1
    assert seen[("toolbridge_request_duration_seconds_count", (("route", "/v1/chat/completions"),))] == 1
    assert seen[("toolbridge_requests_total", (("method", "GET"), ("route", "unmatched"), ("status", "401")))] == 1
    assert seen[("toolbridge_upstream_duration_seconds_count", (("kind", "chat"),))] == 2
    call = (("outcome", "ok"), ("server", "basic"), ("tool", "echo"))
    assert seen[("toolbridge_tool_calls_total", call)] == 1
    assert seen[("toolbridge_tool_duration_seconds_count", (("server", "basic"), ("tool", "echo")))] == 1
    assert seen[("toolbridge_tokens_total", (("direction", "in"),))] == 31
    assert seen[("toolbridge_tokens_total", (("direction", "out"),))] == 7
    assert seen[("toolbridge_mcp_server_state", (("server", "basic"), ("state", "ready")))] == 1
    assert seen[("toolbridge_mcp_server_state", (("server", "broken"), ("state", "failed")))] == 1
    assert seen[("toolbridge_mcp_server_tools", (("server", "basic"),))] > 0
    assert seen[("toolbridge_requests_in_flight", ())] == 1  # the scrape itself
    assert seen[("toolbridge_requests_total", (("method", "other"), ("route", "/tools"), ("status", "405")))] == 3


def test_metrics_can_be_opened_to_scrapers_without_a_key(tmp_path: Path, upstream: FakeUpstream) -> None:
    with running_gateway(tmp_path, upstream_url=f"{upstream.url}/v1", api_keys="k1", metrics_public=True) as gateway:
        assert httpx.get(f"{gateway.url}/metrics").status_code == 200
        assert httpx.get(f"{gateway.url}/v1/models").status_code == 401
