"""Two gateways behind one Redis (TOOLBRIDGE_STATE_URL=redis://), as replicas behind a load balancer: a
conversation may move from one to the other and loses nothing; Redis going away costs memory, not answers."""

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import openai
import pytest

from tests.chat.memory.test_memory import after_system, ask, tool_turn
from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.support.replica_services import Nginx, RedisServer

CLIENT_TOOL = {"type": "function", "function": {"name": "get_location", "parameters": {"type": "object"}}}


@pytest.fixture(scope="module")
def replicas(redis_server: RedisServer, upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[tuple[Gateway, Gateway]]:
    settings: dict[str, Any] = {"upstream_url": f"{upstream.url}/v1", "tool_trace": "off",
                                "state_url": redis_server.url}
    servers = {"basic": stdio_entry("basic.py")}
    with (running_gateway(tmp_path_factory.mktemp("a"), servers, ready=["basic"], **settings) as a,
          running_gateway(tmp_path_factory.mktemp("b"), servers, ready=["basic"], **settings) as b):
        yield a, b


def health(gateway: Gateway) -> dict[str, Any]:
    return httpx.get(f"{gateway.url}/health", timeout=30).json()


def test_the_next_turn_on_the_other_replica_gets_the_tool_calls_back(
    replicas: tuple[Gateway, Gateway], upstream: FakeUpstream
) -> None:
    a, b = replicas
    question = {"role": "user", "content": "Echo replica."}
    upstream.script(*tool_turn("replica", "It said replica."))
    content = ask(a.client(), [question], stream=False)
    call, result = upstream.chat_requests()[-1]["messages"][-2:]
    upstream.script(Turn(content="Yes."))
    history = [question, {"role": "assistant", "content": content}, {"role": "user", "content": "Again?"}]
    ask(b.client(), history, stream=True)
    sent = after_system(upstream.chat_requests()[0]["messages"])
    assert sent == [question, call, result, {"role": "assistant", "content": "It said replica."}, history[-1]]
    assert health(b)["memory"] == {"store": "redis"}


def test_a_mixed_turn_started_on_one_replica_finishes_on_the_other(
    replicas: tuple[Gateway, Gateway], upstream: FakeUpstream
) -> None:
    a, b = replicas
    ask_where = [{"role": "user", "content": "Where am I, and echo across."}]
    calls = [Call("get_location", {}), Call("basic__echo", {"text": "across"})]
    upstream.script(Turn(content="Checking.", calls=calls))
    first = a.client().chat.completions.create(model="m", messages=ask_where, tools=[CLIENT_TOOL])  # type: ignore[list-item]
    message = first.choices[0].message
    assert first.choices[0].finish_reason == "tool_calls"
    [client_call] = message.tool_calls or []
    upstream.script(Turn(content="Lisbon, and the echo said across."))
    follow_up = [*ask_where, message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": client_call.id, "content": "Lisbon"}]
    b.client().chat.completions.create(model="m", messages=follow_up, tools=[CLIENT_TOOL])  # type: ignore[arg-type]
    seen = upstream.chat_requests()[0]["messages"]
    assistant = next(m for m in seen if m["role"] == "assistant")
    assert [c["function"]["name"] for c in assistant["tool_calls"]] == ["get_location", "basic__echo"]
    results = {m["tool_call_id"]: m["content"] for m in seen if m["role"] == "tool"}
    assert results.pop(client_call.id) == "Lisbon"
    [echoed] = results.values()  # the MCP half, run on A, given back on B
    assert json.loads(echoed)["data"] == {"result": "echo: across"}


def test_without_redis_answers_keep_coming_and_health_says_why_until_it_is_back(
    redis_server: RedisServer, replicas: tuple[Gateway, Gateway], upstream: FakeUpstream, tmp_path: Path
) -> None:
    a, b = replicas
    redis_server.stop()
    try:
        question = {"role": "user", "content": "Echo outage."}
        upstream.script(*tool_turn("outage", "It said outage."))
        content = ask(a.client(), [question], stream=False)
        assert content.endswith("It said outage.")  # served, without memory
        down = health(b)
        assert down["status"] == "degraded" and "127.0.0.1" in down["memory"]["error"]
        upstream.script(Turn(content="No memory."))
        history = [question, {"role": "assistant", "content": content}, {"role": "user", "content": "Again?"}]
        ask(b.client(), history, stream=False)
        assert after_system(upstream.chat_requests()[0]["messages"]) == history  # nothing to restore
    finally:
        redis_server.start()
    assert health(a)["status"] == "ok" and health(a)["memory"] == {"store": "redis"}
    question = {"role": "user", "content": "Echo recovered."}
    upstream.script(*tool_turn("recovered", "It said recovered."))
    content = ask(a.client(), [question], stream=False)
    upstream.script(Turn(content="Yes."))
    ask(b.client(), [question, {"role": "assistant", "content": content}, {"role": "user", "content": "And?"}],
        stream=False)
    restored = [m for m in upstream.chat_requests()[0]["messages"] if m["role"] == "tool"]
    assert len(restored) == 1 and json.loads(restored[0]["content"])["data"] == {"result": "echo: recovered"}


def test_through_nginx_a_conversation_moves_between_replicas_and_keeps_its_calls(
    replicas: tuple[Gateway, Gateway], upstream: FakeUpstream, tmp_path: Path
) -> None:
    a, b = replicas
    nginx = Nginx(tmp_path, [urlsplit(a.url).port or 0, urlsplit(b.url).port or 0])
    try:
        before = [chats(a), chats(b)]
        client = openai.OpenAI(base_url=f"{nginx.url}/v1", api_key="unused", max_retries=0)
        question = {"role": "user", "content": "Echo balanced."}
        upstream.script(*tool_turn("balanced", "It said balanced."))
        content = ask(client, [question], stream=True)
        upstream.script(Turn(content="Yes."))
        ask(client, [question, {"role": "assistant", "content": content}, {"role": "user", "content": "Sure?"}],
            stream=True)
    finally:
        nginx.stop()
    deadline = time.monotonic() + 10  # a request is counted once its last byte is sent, as the client reads it
    while sum(counted := [chats(a) - before[0], chats(b) - before[1]]) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert counted == [1, 1]  # round robin: one turn on each replica
    restored = [m for m in upstream.chat_requests()[0]["messages"] if m["role"] == "tool"]
    assert len(restored) == 1 and json.loads(restored[0]["content"])["data"] == {"result": "echo: balanced"}


def chats(gateway: Gateway) -> int:
    """Chat requests this replica answered, from its own metrics."""
    metrics = httpx.get(f"{gateway.url}/metrics", timeout=30).text
    return sum(int(float(line.rsplit(" ", 1)[1])) for line in metrics.splitlines()
               if line.startswith("toolbridge_requests_total{") and 'route="/v1/chat/completions"' in line)
