"""The rest of the HTTP surface: pass-through, health, the tool list, and every error envelope."""

from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.conftest import BASIC_TOOLS, Gateway, running_gateway, stdio_entry, wait_for_health
from tests.support.fake_upstream import MODEL, FakeUpstream, Turn
from tests.support.servers import free_port, raw_upstream

ASK = [{"role": "user", "content": "hi"}]


def assert_envelope(response: httpx.Response, status: int, error_type: str) -> dict:
    assert response.status_code == status
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == error_type
    assert error["message"]
    return error


def test_models_are_the_upstreams(gateway: Gateway) -> None:
    models = gateway.client().models.list()
    assert [m.id for m in models.data] == [MODEL]


def test_embeddings_pass_through_unchanged(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script()
    result = gateway.client().embeddings.create(model="embed", input="hello")
    assert result.data[0].embedding == [0.25, -0.5, 0.125]
    assert upstream.requests[-1]["model"] == "embed"
    assert upstream.requests[-1]["input"] == "hello"


def test_streaming_completions_pass_through(gateway: Gateway) -> None:
    stream = gateway.client().completions.create(model="m", prompt="Tell me", stream=True)
    assert "".join(chunk.choices[0].text for chunk in stream) == "Once upon a time"


def test_tools_endpoint_maps_names_back_to_servers(gateway: Gateway) -> None:
    body = httpx.get(f"{gateway.url}/tools").json()
    by_name = {tool["function"]["name"]: tool for tool in body["data"]}
    assert by_name["basic__get_weather"]["server"] == "basic"
    assert by_name["basic__get_weather"]["tool"] == "get.weather"
    assert by_name["remote__add"]["server"] == "remote"
    assert by_name["basic__add"]["function"]["parameters"]["type"] == "object"


def test_health_reports_each_server(gateway: Gateway) -> None:
    body = httpx.get(f"{gateway.url}/health").json()
    servers = body["servers"]
    assert body["status"] == "degraded"
    assert servers["basic"]["state"] == "ready"
    assert servers["basic"]["tools"] == len(BASIC_TOOLS)
    assert servers["remote"]["transport"] == "http"
    assert servers["legacy"]["transport"] == "sse"
    assert servers["broken"]["state"] == "failed"
    assert "GITHUB_TOKEN is not set" in servers["broken"]["error"]
    assert body["memory"] == {"store": "sqlite"}
    assert servers["invalid"]["state"] == "failed"
    assert "server 'invalid'" in servers["invalid"]["error"]
    assert "mcp.json" in servers["invalid"]["error"]
    assert servers["off"]["state"] == "disabled"


def test_slow_server_starts_in_the_background(tmp_path: Path, upstream: FakeUpstream) -> None:
    gate = tmp_path / "gate"  # the server finishes starting once this file exists
    servers = {"basic": stdio_entry("basic.py"), "gated": stdio_entry("gated_start.py", str(gate))}
    with running_gateway(tmp_path, servers, ready=("basic",), upstream_url=f"{upstream.url}/v1",
                         mcp_start_wait=0) as gateway:  # a chat waits for no server (tests/test_server_starts.py)
        assert httpx.get(f"{gateway.url}/health").json()["servers"]["gated"]["state"] == "starting"
        upstream.script(Turn(content="served while gated starts"))
        reply = gateway.client().chat.completions.create(model="m", messages=ASK)
        assert reply.choices[0].message.content == "served while gated starts"
        assert "gated__ping" not in {t["function"]["name"] for t in upstream.chat_requests()[0]["tools"]}

        gate.touch()
        wait_for_health(gateway.url, lambda b: b["servers"]["gated"]["state"] == "ready")
        names = {tool["function"]["name"] for tool in httpx.get(f"{gateway.url}/tools").json()["data"]}
        assert "gated__ping" in names


@pytest.mark.parametrize(
    ("content", "headers", "param"),
    [
        (b"{not json", {"content-type": "application/json"}, None),
        (b'{"model": "m"}', {"content-type": "application/json"}, "messages"),
        (b'{"model": "m", "messages": []}', {"content-type": "application/json"}, "messages"),
        (b'{"model": "m", "messages": "hi"}', {"content-type": "application/json"}, "messages"),
        (b'{"model": "m", "messages": [{"content": "no role"}]}', {"content-type": "application/json"},
         "messages.0.role"),
        (b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}', {"content-type": "text/plain"}, None),
        (b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}',
         {"content-type": "application/x-www-form-urlencoded"}, None),
    ],
)
def test_bad_requests_get_a_400_envelope(gateway: Gateway, content: bytes, headers: dict, param: str | None) -> None:
    response = httpx.post(f"{gateway.url}/v1/chat/completions", content=content, headers=headers)
    error = assert_envelope(response, 400, "invalid_request_error")
    assert error["param"] == param
    if headers["content-type"] != "application/json":
        assert "Content-Type: application/json" in error["message"]


def test_missing_messages_through_the_sdk_is_a_bad_request(gateway: Gateway) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        gateway.client().chat.completions.create(model="m", messages=[])
    assert caught.value.param == "messages"


def test_unknown_route_is_a_404_envelope(gateway: Gateway) -> None:
    assert_envelope(httpx.get(f"{gateway.url}/nowhere"), 404, "not_found_error")
    assert_envelope(httpx.delete(f"{gateway.url}/health"), 405, "invalid_request_error")


def test_a_bug_in_the_chat_route_is_a_500_envelope_that_keeps_its_details_in_the_log(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.chat import service

    def broken(*_args: object) -> None:
        raise RuntimeError("internal detail sk-upstream")

    monkeypatch.setattr(service, "trace_mode", broken)  # what the route calls, through the chat service
    response = httpx.post(f"{gateway.url}/v1/chat/completions", json={"model": "m", "messages": ASK})
    error = assert_envelope(response, 500, "server_error")
    assert "internal detail" not in response.text
    assert error["message"] == "Internal gateway error; see the gateway log."
    assert response.headers["x-request-id"].startswith("req_")


@pytest.fixture
def lone_gateway(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Gateway]:
    """A gateway with no MCP config at all, pointed at the upstream URL the test parametrises."""
    with running_gateway(tmp_path, **getattr(request, "param", {})) as gateway:
        yield gateway


def closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}/v1"


@pytest.mark.parametrize(
    "lone_gateway",
    [{"upstream_url": closed_port_url(), "upstream_transport": kind} for kind in ("aiohttp", "httpx")],
    indirect=True,
)
def test_unreachable_upstream_is_a_502_that_says_what_to_do(lone_gateway: Gateway) -> None:
    url = lone_gateway.settings.upstream.base
    for stream in (False, True):
        response = httpx.post(
            f"{lone_gateway.url}/v1/chat/completions", json={"model": "m", "messages": ASK, "stream": stream}
        )
        error = assert_envelope(response, 502, "upstream_error")
        assert url in error["message"]
        assert "TOOLBRIDGE_UPSTREAM_URL" in error["message"]
        assert "LM Studio" in error["message"]
    assert_envelope(httpx.get(f"{lone_gateway.url}/v1/models"), 502, "upstream_error")


@pytest.fixture
def silent_upstream() -> Iterator[str]:
    """Accepts connections and never answers, until the test ends."""
    with raw_upstream(lambda _connection: None) as url:
        yield url


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_upstream_timeout_is_a_504(tmp_path: Path, silent_upstream: str, transport: str) -> None:
    options = {"upstream_url": silent_upstream, "upstream_timeout": 0.5, "upstream_transport": transport}
    with running_gateway(tmp_path, **options) as gateway:
        response = httpx.post(f"{gateway.url}/v1/chat/completions", json={"model": "m", "messages": ASK}, timeout=10)
    error = assert_envelope(response, 504, "upstream_error")
    assert "TOOLBRIDGE_UPSTREAM_TIMEOUT" in error["message"]


def test_missing_mcp_config_means_no_tools_and_says_so(lone_gateway: Gateway) -> None:
    body = httpx.get(f"{lone_gateway.url}/health").json()
    assert body["servers"] == {}
    assert body["mcp_config"]["found"] is False
    assert "no MCP tools" in body["mcp_config"]["note"]
    assert body["status"] == "degraded"


def test_api_keys_guard_the_api_but_not_health(tmp_path: Path, upstream: FakeUpstream) -> None:
    with running_gateway(tmp_path, upstream_url=f"{upstream.url}/v1", api_keys="k1, k2") as gateway:
        client = gateway.client(api_key="wrong")
        with pytest.raises(openai.AuthenticationError):
            client.models.list()
        assert_envelope(httpx.get(f"{gateway.url}/v1/models"), 401, "authentication_error")
        assert_envelope(httpx.get(f"{gateway.url}/tools"), 401, "authentication_error")
        assert httpx.get(f"{gateway.url}/health").status_code == 200
        upstream.script(Turn(content="welcome"))
        good = gateway.client(api_key="k2")
        assert good.chat.completions.create(model="m", messages=ASK).choices[0].message.content == "welcome"
    assert all("authorization" not in h for h in upstream.headers)


def test_request_ids_are_returned(gateway: Gateway) -> None:
    assert httpx.get(f"{gateway.url}/health").headers["x-request-id"].startswith("req_")


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_both_upstream_transports_relay_streams_and_pass_through(
    tmp_path: Path, upstream: FakeUpstream, transport: str
) -> None:
    with running_gateway(tmp_path, upstream_url=f"{upstream.url}/v1", upstream_transport=transport) as gateway:
        client = gateway.client()
        upstream.script(Turn(content="streamed through " + transport))
        stream = client.chat.completions.create(model="m", messages=ASK, stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in stream) == "streamed through " + transport
        assert [m.id for m in client.models.list().data] == [MODEL]


def test_models_carry_the_context_length_lm_studio_reports(gateway: Gateway) -> None:
    body = httpx.get(f"{gateway.url}/v1/models").json()
    assert body["data"] == [{"id": MODEL, "object": "model", "owned_by": "organization_owner", "context_length": 8192}]
