"""Conversion end to end: what the model receives from the hard test server through the gateway."""

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.conversion_checks import grammar_problems
from tests.support.fake_upstream import MODEL, VISION_MODEL, Call, FakeUpstream, Turn, envelopes
from tests.support.mcp_servers.hard import PNG

ASK = [{"role": "user", "content": "go"}]


@pytest.fixture(scope="module")
def hard_gateway(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    servers = {"hard": stdio_entry("hard.py")}
    with running_gateway(tmp_path_factory.mktemp("hard"), servers, ready=("hard",),
                         upstream_url=f"{upstream.url}/v1") as gateway:
        yield gateway


def received(gateway: Gateway, upstream: FakeUpstream, call: Call, model: str = MODEL) -> dict:
    """The envelope the model got for one call, as the next upstream request carried it."""
    upstream.script(Turn(calls=[call]), Turn(content="done"))
    gateway.client().chat.completions.create(model=model, messages=ASK)
    [envelope] = envelopes(upstream.chat_requests()[1])
    return envelope


def test_the_model_gets_grammar_safe_tools_with_valid_names(hard_gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="ok"))
    hard_gateway.client().chat.completions.create(model=MODEL, messages=ASK)
    tools = upstream.chat_requests()[0]["tools"]
    assert len(tools) == 17
    assert {t["function"]["name"]: grammar_problems(t) for t in tools if grammar_problems(t)} == {}
    register = next(t for t in tools if t["function"]["name"] == "hard__register")["function"]["parameters"]
    person = register["properties"]["person"]
    assert person["properties"]["address"]["properties"]["postcode"]["pattern"] == "^.*([0-9]{4,5}).*$"
    assert person["properties"]["nickname"]["type"] == "string"
    assert register["properties"]["mode"]["description"] == "One of: 'fast', 'careful'. (default: 'careful')"


@pytest.mark.parametrize(
    ("call", "data"),
    [
        (Call("hard__json_text", {}), {"rows": [1, 2, 3]}),
        (Call("hard__image", {}), {"type": "image", "mime_type": "image/png", "size_bytes": 66}),
        (Call("hard__audio", {}), {"type": "audio", "mime_type": "audio/wav", "size_bytes": 44}),
        (Call("hard__link", {}), {"type": "resource_link", "uri": "file:///srv/report.pdf", "name": "report.pdf",
                                  "mime_type": "application/pdf"}),
        (Call("hard__embedded_text", {}), "# Notes"),
        (Call("hard__embedded_blob", {}), {"type": "resource", "uri": "file:///a.zip",
                                           "mime_type": "application/zip", "size_bytes": 44}),
        (Call("hard__structured", {"city": "Oslo"}), {"city": "Oslo", "temp_c": 21.5}),
        (Call("hard__for_user_only", {}), "model sees this"),
        (Call("hard__deep", {"root": {"level2": {"level3": {"leaf": 7}}}}), {"result": 7}),
        (Call("hard__plant", {"tree": {"label": "oak", "children": [{"label": "branch"}]}}),
         {"result": "planted oak with 1 children"}),
    ],
)
def test_each_result_type_reaches_the_model_as_an_envelope(
    hard_gateway: Gateway, upstream: FakeUpstream, call: Call, data: object
) -> None:
    envelope = received(hard_gateway, upstream, call)
    assert envelope["status"] == "success"
    assert envelope["data"] == data
    assert "meta" not in envelope  # nothing cut, nothing attached: nothing to say


def test_the_hard_names_map_back_to_their_tools(hard_gateway: Gateway, upstream: FakeUpstream) -> None:
    names = {tool["tool"]: tool["function"]["name"] for tool in httpx.get(f"{hard_gateway.url}/tools").json()["data"]}
    for tool, result in (("weather.current", "dotted"), ("天气", "unicode"), ("x" * 100, "long")):
        envelope = received(hard_gateway, upstream, Call(names[tool], {}))
        assert envelope["data"] == {"result": result}  # each of these tools answers with its own word


def test_is_error_and_empty_results(hard_gateway: Gateway, upstream: FakeUpstream) -> None:
    failed = received(hard_gateway, upstream, Call("hard__failing", {"reason": "no disk"}))
    assert failed["status"] == "error"
    assert failed["data"] == {"error": "tool_error", "message": "Error executing tool failing: cannot do that: no disk"}
    empty = received(hard_gateway, upstream, Call("hard__empty", {}))
    assert (empty["status"], empty["data"], empty["meta"]["note"]) == ("success", None, "The tool returned no content.")


def test_a_large_result_is_cut_to_the_cap_with_guidance(hard_gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(calls=[Call("hard__large", {})]), Turn(content="done"))
    hard_gateway.client().chat.completions.create(model=MODEL, messages=ASK)
    content = upstream.chat_requests()[1]["messages"][-1]["content"]
    assert len(content) <= 25_000
    envelope = json.loads(content)
    truncated = envelope["meta"]["truncated"]
    assert truncated["field"] == "result"
    assert truncated["kept_chars"] < truncated["total_chars"] == 100_000
    assert envelope["data"]["result"].startswith("line 000000\nline 000001\n")
    assert "ask for less" in truncated["hint"]


@pytest.mark.parametrize(
    ("arguments", "fields"),
    [
        ({}, [{"field": "city", "problem": "missing: this field is required"}]),
        ({"city": 42}, [{"field": "city", "problem": "expected string, got 42"}]),
    ],
)
def test_invalid_arguments_are_answered_by_the_gateway_with_the_fields(
    hard_gateway: Gateway, upstream: FakeUpstream, arguments: dict, fields: list
) -> None:
    envelope = received(hard_gateway, upstream, Call("hard__structured", arguments))
    assert envelope["status"] == "error"
    assert envelope["data"]["error"] == "invalid_arguments"
    assert envelope["data"]["fields"] == fields


def test_images_reach_a_vision_model_after_the_tool_messages(hard_gateway: Gateway, upstream: FakeUpstream) -> None:
    received(hard_gateway, upstream, Call("hard__image", {}), model=VISION_MODEL)
    last = upstream.chat_requests()[1]["messages"][-1]
    assert last["role"] == "user"
    assert last["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    received(hard_gateway, upstream, Call("hard__image", {}), model=MODEL)
    assert upstream.chat_requests()[1]["messages"][-1]["role"] == "tool"


def test_health_names_the_upstream_kind(hard_gateway: Gateway) -> None:
    upstream = httpx.get(f"{hard_gateway.url}/health").json()["upstream"]
    assert (upstream["kind"], upstream["schema_profile"]) == ("lmstudio", "lmstudio")


@pytest.fixture
def lone_hard_gateway(upstream: FakeUpstream, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Gateway]:
    servers = {"hard": stdio_entry("hard.py")}
    with running_gateway(tmp_path, servers, ready=("hard",), upstream_url=f"{upstream.url}/v1",
                         **request.param) as gateway:
        yield gateway


@pytest.mark.parametrize("lone_hard_gateway", [{"result_format": "text"}], indirect=True)
def test_text_format_gives_the_tools_text(lone_hard_gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(calls=[Call("hard__json_text", {})]), Turn(content="done"))
    lone_hard_gateway.client().chat.completions.create(model=MODEL, messages=ASK)
    assert upstream.chat_requests()[1]["messages"][-1]["content"] == '{"rows": [1, 2, 3]}'
    assert '"Error:"' in upstream.chat_requests()[0]["messages"][0]["content"]


@pytest.mark.parametrize("lone_hard_gateway", [{"vision": "on"}, {"vision": "off"}], indirect=True)
def test_vision_on_and_off_override_what_lm_studio_says(lone_hard_gateway: Gateway, upstream: FakeUpstream) -> None:
    on = lone_hard_gateway.settings.upstream.vision == "on"
    received(lone_hard_gateway, upstream, Call("hard__image", {}), model=MODEL if on else VISION_MODEL)
    last = upstream.chat_requests()[1]["messages"][-1]
    assert (last["role"] == "user" and last["content"][1]["type"] == "image_url") is on
