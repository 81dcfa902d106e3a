"""Clients told when asking again cannot help (issue 45, C2): Claude Code retried the gateway's 502 and 401 ten times
and printed nothing for three minutes. Errors a retry cannot fix carry `x-should-retry: false`, which the official
anthropic and openai SDKs (and Claude Code) obey, so the person reads the cause at once; a rate limit keeps its
retries. Driven by the SDKs over real HTTP, counting the requests they send."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from tests.conftest import Gateway, running_gateway
from tests.support.fake_upstream import FakeUpstream, Turn
from tests.support.servers import free_port

ASK: list[Any] = [{"role": "user", "content": "hello"}]
HINT = "Start LM Studio's local server"


class Sent:
    """An HTTP client of the SDK's own kind (the anthropic SDK's is httpx2's) that counts the requests it sends."""

    def __init__(self, http: Any = httpx) -> None:
        self.paths: list[str] = []
        self.client = http.Client(event_hooks={"request": [lambda request: self.paths.append(request.url.path)]})


@pytest.fixture
def nothing_upstream(tmp_path: Path) -> Iterator[Gateway]:
    """A gateway whose model server is not running: nothing listens at its URL."""
    with running_gateway(tmp_path, upstream_url=f"http://127.0.0.1:{free_port()}/v1") as gateway:
        yield gateway


def test_the_anthropic_sdk_reads_a_model_server_that_is_not_running_at_the_first_answer(
    nothing_upstream: Gateway,
) -> None:
    sent = Sent(httpx2)
    client = anthropic.Anthropic(base_url=nothing_upstream.url, api_key="any", max_retries=2, http_client=sent.client)
    with pytest.raises(anthropic.InternalServerError, match=HINT) as whole:
        client.messages.create(model="qwen3-8b", max_tokens=50, messages=ASK)
    assert whole.value.response.headers["x-should-retry"] == "false"
    with pytest.raises(anthropic.InternalServerError, match=HINT), client.messages.stream(  # Claude Code streams
        model="qwen3-8b", max_tokens=50, messages=ASK
    ) as stream:
        stream.get_final_message()
    assert sent.paths == ["/v1/messages", "/v1/messages"]  # once each: no retry


def test_the_openai_sdk_reads_it_at_once_through_chat_completions_and_responses(nothing_upstream: Gateway) -> None:
    sent = Sent()
    client = openai.OpenAI(base_url=f"{nothing_upstream.url}/v1", api_key="any", max_retries=2,
                           http_client=sent.client)
    with pytest.raises(openai.InternalServerError, match=HINT):
        client.chat.completions.create(model="qwen3-8b", messages=ASK)
    with pytest.raises(openai.InternalServerError, match=HINT):
        client.responses.create(model="qwen3-8b", input="hello")
    assert sent.paths == ["/v1/chat/completions", "/v1/responses"]


def test_refusals_say_no_retry_on_every_door_and_a_rate_limit_keeps_its_retries(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    limited = Turn(status=429, error="slow down", headers={"retry-after": "0"})
    upstream.script(limited, limited, Turn(content="at last"))
    sent = Sent(httpx2)
    with running_gateway(tmp_path, upstream_url=f"{upstream.url}/v1", api_keys="k1") as gateway:
        wrong = {"Authorization": "Bearer wrong"}
        refused = [
            httpx.post(f"{gateway.url}/v1/messages", headers=wrong, json={}),
            httpx.post(f"{gateway.url}/v1/chat/completions", headers=wrong, json={}),
            httpx.post(f"{gateway.url}/api/chat", headers=wrong, json={}),
            httpx.head(f"{gateway.url}/", headers={"x-api-key": "wrong"}),  # Claude Code's first request
            httpx.post(f"{gateway.url}/v1/messages", headers={"x-api-key": "k1"}, json={"model": "m"}),
            httpx.get(f"{gateway.url}/api/pull", headers={"x-api-key": "k1"}),
        ]
        client = anthropic.Anthropic(base_url=gateway.url, api_key="k1", max_retries=2, http_client=sent.client)
        answer = client.messages.create(model="qwen3-8b", max_tokens=50, messages=ASK)
    assert [r.status_code for r in refused] == [401, 401, 401, 401, 400, 404]
    assert [r.headers.get("x-should-retry") for r in refused] == ["false"] * 6
    assert answer.content[0].type == "text" and answer.content[0].text == "at last"
    assert sent.paths == ["/v1/messages"] * 3  # the upstream's 429 twice, retried as the SDK does
