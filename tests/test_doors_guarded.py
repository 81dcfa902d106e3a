"""Every front door behind the same guard: the key (a bearer, or Anthropic's x-api-key), the Host and Origin
checks, the body limit, each refusal in the door's own error shape; the gateway's key never reaches the upstream;
the metrics count each door's route."""

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.support.servers import ServerThread

KEY = "sk-door-CANARY"
ASK = "Echo hi, please."
ANSWER = "The tool said hi."
# Each door: a request asking ASK, as its clients send it.
REQUESTS: dict[str, tuple[str, dict[str, Any]]] = {
    "responses": ("/v1/responses", {"model": "m", "input": ASK}),
    "messages": ("/v1/messages", {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": ASK}]}),
    "ollama": ("/api/chat", {"model": "m", "messages": [{"role": "user", "content": ASK}], "stream": False}),
}


def refusal_message(door: str, body: dict[str, Any]) -> str:
    """The refusal's message, read from the door's own error shape (and only from it)."""
    if door == "messages":
        assert body["type"] == "error", body
        return str(body["error"]["message"])
    if door == "ollama":
        assert isinstance(body["error"], str), body
        return body["error"]
    return str(body["error"]["message"])


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, FakeUpstream]]:
    upstream = FakeUpstream()
    with (ServerThread(upstream.app) as thread,
          running_gateway(tmp_path_factory.mktemp("doors"), {"basic": stdio_entry("basic.py")}, ready=("basic",),
                          key=KEY, api_keys=KEY, upstream_url=f"{thread.url}/v1", max_body_bytes=4000) as gateway):
        yield gateway, upstream


@pytest.mark.parametrize("door", REQUESTS)
def test_each_door_refuses_what_the_chat_route_refuses_in_its_own_shape(
    keyed: tuple[Gateway, FakeUpstream], door: str
) -> None:
    gateway, _ = keyed
    path, body = REQUESTS[door]
    url = f"{gateway.url}{path}"
    missing = httpx.post(url, json=body)
    assert missing.status_code == 401 and "Missing API key" in refusal_message(door, missing.json())
    if door == "messages":
        assert missing.json()["error"]["type"] == "authentication_error"
    wrong = httpx.post(url, json=body, headers={"x-api-key": "sk-wrong"})
    assert wrong.status_code == 401 and refusal_message(door, wrong.json()) == "Incorrect API key."
    rebinding = httpx.post(url, json=body, headers={"x-api-key": KEY, "Host": "evil.example"})
    assert rebinding.status_code == 403 and "evil.example" in refusal_message(door, rebinding.json())
    page = httpx.post(url, json=body, headers={"x-api-key": KEY, "Origin": "https://evil.example"})
    assert page.status_code == 403 and "evil.example" in refusal_message(door, page.json())
    large = httpx.post(url, json={**body, "padding": "x" * 5000}, headers={"x-api-key": KEY})
    assert large.status_code == 413 and refusal_message(door, large.json())


@pytest.mark.parametrize("door", REQUESTS)
@pytest.mark.parametrize("header", ["authorization", "x-api-key"])
def test_each_door_answers_with_either_key_header_and_the_key_stays_here(
    keyed: tuple[Gateway, FakeUpstream], door: str, header: str
) -> None:
    gateway, upstream = keyed
    upstream.script(Turn(calls=[Call("basic__echo", {"text": "hi"})]), Turn(content=ANSWER))
    path, body = REQUESTS[door]
    sent = {"authorization": f"Bearer {KEY}"} if header == "authorization" else {"x-api-key": KEY}
    answer = httpx.post(f"{gateway.url}{path}", json=body, headers=sent, timeout=30)
    assert answer.status_code == 200, answer.text
    assert ANSWER in answer.text
    last = upstream.requests[-1]["messages"]
    assert any(m.get("role") == "tool" and "echo: hi" in str(m.get("content")) for m in last)
    assert all(KEY not in str(headers) for headers in upstream.headers)
    recent = httpx.get(f"{gateway.url}/ui/requests", headers=sent).json()["data"]
    assert recent[-1]["door"] == door  # the status page says which API it came through
    metrics = httpx.get(f"{gateway.url}/metrics", headers=sent).text
    assert f'route="{path}",status="200"' in metrics.replace('method="POST",', "")
