"""MCP sampling: a server asks for a completion mid-call, and the upstream model answers it."""

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import Call, FakeUpstream, Turn, envelopes

ASK = [{"role": "user", "content": "ask the model"}]


@pytest.fixture
def sampling_gateway(upstream: FakeUpstream, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Gateway]:
    options = dict(request.param)
    # 2025: sampling is a request to the client mid-call; 2026: an InputRequiredResult answered and retried.
    servers = {"basic": {**stdio_entry("basic.py"), "mode": options.pop("mode", "auto")}}
    with running_gateway(tmp_path, servers, ready=("basic",), upstream_url=f"{upstream.url}/v1", **options) as gateway:
        yield gateway


@pytest.mark.parametrize("sampling_gateway", [{"mode": "legacy"}, {"mode": "auto"}], indirect=True)
def test_a_servers_sampling_request_is_answered_by_the_upstream_on_both_protocol_eras(
    sampling_gateway: Gateway, upstream: FakeUpstream, request: pytest.FixtureRequest
) -> None:
    upstream.script(Turn(calls=[Call("basic__ask_model", {"question": "Capital of France?"})]),
                    Turn(content="Paris", usage=(7, 1)), Turn(content="done"))
    reply = sampling_gateway.client().chat.completions.create(model="qwen3-8b", messages=ASK)
    assert reply.choices[0].message.content == "done"
    protocol = httpx.get(f"{sampling_gateway.url}/health").json()["servers"]["basic"]["protocol_version"]
    mode = request.node.callspec.params["sampling_gateway"]["mode"]
    assert protocol == {"legacy": "2025-11-25", "auto": "2026-07-28"}[mode]
    _, sampled, final = upstream.chat_requests()
    assert sampled["model"] == "tiny-model"
    assert sampled["max_tokens"] == 50
    assert sampled["messages"] == [{"role": "system", "content": "Answer in one word."},
                                   {"role": "user", "content": "Capital of France?"}]
    assert "tools" not in sampled
    [envelope] = envelopes(final)
    assert envelope["data"] == {"result": "model said: Paris"}


@pytest.mark.parametrize("sampling_gateway", [{"sampling": False, "mode": "legacy"}, {"sampling": False}],
                         indirect=True)
def test_sampling_can_be_turned_off(sampling_gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(calls=[Call("basic__ask_model", {"question": "?"})]), Turn(content="done"))
    sampling_gateway.client().chat.completions.create(model="qwen3-8b", messages=ASK)
    assert len(upstream.chat_requests()) == 2  # the server's request was refused, not sent upstream
    [envelope] = envelopes(upstream.chat_requests()[1])
    assert envelope["status"] == "error"
    assert "did not declare the sampling capability" in envelope["data"]["message"]
