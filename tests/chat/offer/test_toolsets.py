"""Tools chosen per request by the user: toolsets as virtual models, the X-Toolbridge-Tools header and
`metadata.toolbridge_tools`, through the gateway with two real servers; and the pure rules as tables."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from app.chat.offer.toolsets import choose_tools, split_model, with_virtual_models
from app.chat.ports import ToolSelection
from app.chat.turn import Caller
from app.chat.turn import Turn as ChatTurn
from app.openai.errors import InvalidRequest
from tests.conftest import BASIC_TOOLS, Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn

TOOLSETS = {"basics": ["basic"], "pick": ["other__add", "basic__echo"]}
CLIENT_TOOL = {"type": "function", "function": {"name": "get_location", "parameters": {"type": "object"}}}


@pytest.fixture(scope="module")
def chooser(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    servers = {"basic": stdio_entry("basic.py"), "other": stdio_entry("basic.py")}
    with running_gateway(tmp_path_factory.mktemp("toolsets"), servers, ready=("basic", "other"),
                         upstream_url=f"{upstream.url}/v1", toolsets=TOOLSETS) as gateway:
        yield gateway


def offered(upstream: FakeUpstream) -> list[str]:
    return [t["function"]["name"] for t in upstream.chat_requests()[0].get("tools") or []]


def test_models_list_a_virtual_model_per_toolset(chooser: Gateway, upstream: FakeUpstream) -> None:
    ids = [m.id for m in chooser.client().models.list()]
    assert ids == [MODEL, f"{MODEL}+basics", f"{MODEL}+pick"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_virtual_model_reaches_the_upstream_as_itself_with_only_its_toolsets_tools(
    chooser: Gateway, upstream: FakeUpstream, stream: bool
) -> None:
    upstream.script(Turn(calls=[Call("basic__echo", {"text": "hi"})]), Turn(content="It said hi."))
    client = chooser.client()
    ask = [{"role": "user", "content": "Echo hi."}]
    if stream:
        chunks = list(client.chat.completions.create(model=f"{MODEL}+basics", messages=ask, stream=True))
        assert {c.model for c in chunks} == {f"{MODEL}+basics"}  # the client sees the model it chose
    else:
        answer = client.chat.completions.create(model=f"{MODEL}+basics", messages=ask)
        assert answer.model == f"{MODEL}+basics" and answer.choices[0].message.content == "It said hi."
    first, second = upstream.chat_requests()
    assert first["model"] == second["model"] == MODEL
    assert offered(upstream) == [f"basic__{name}" for name in BASIC_TOOLS]
    assert json.loads(second["messages"][-1]["content"])["data"] == {"result": "echo: hi"}


def test_a_toolset_may_name_single_tools_and_client_tools_are_never_dropped(
    chooser: Gateway, upstream: FakeUpstream
) -> None:
    upstream.script(Turn(content="ok"))
    chooser.client().chat.completions.create(model=f"{MODEL}+pick", messages=[{"role": "user", "content": "x"}],
                                             tools=[CLIENT_TOOL])
    assert offered(upstream) == ["get_location", "basic__echo", "other__add"]


@pytest.mark.parametrize(("header", "expected"), [
    ("other", [f"other__{name}" for name in BASIC_TOOLS]),
    ("-basic", [f"other__{name}" for name in BASIC_TOOLS]),
    ("basic__add, other__echo", ["basic__add", "other__echo"]),
    ("pick,-basic__echo", ["other__add"]),  # a toolset by name, less one of its tools
])
def test_the_header_chooses_servers_tools_and_toolsets(
    chooser: Gateway, upstream: FakeUpstream, header: str, expected: list[str]
) -> None:
    upstream.script(Turn(content="ok"))
    client = chooser.client(default_headers={"X-Toolbridge-Tools": header})
    client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}])
    assert offered(upstream) == expected


def test_the_header_narrows_a_virtual_model(chooser: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="ok"))
    client = chooser.client(default_headers={"X-Toolbridge-Tools": "other"})
    client.chat.completions.create(model=f"{MODEL}+pick", messages=[{"role": "user", "content": "x"}])
    assert offered(upstream) == ["other__add"]


def test_metadata_chooses_too_and_the_upstream_never_sees_that_key(chooser: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="ok"))
    chooser.client().chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "x"}],
        metadata={"toolbridge_tools": "basic__echo", "session": "s-1"},
    )
    assert offered(upstream) == ["basic__echo"]
    assert upstream.chat_requests()[0]["metadata"] == {"session": "s-1"}


def test_a_call_to_a_tool_left_out_is_answered_as_unknown(chooser: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(calls=[Call("basic__add", {"a": 1, "b": 2})]), Turn(content="ok"))
    client = chooser.client(default_headers={"X-Toolbridge-Tools": "basic__echo"})
    client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}])
    result = json.loads(upstream.chat_requests()[1]["messages"][-1]["content"])
    assert result["data"]["error"] == "unknown_tool"


@pytest.mark.parametrize(("where", "value", "param"), [
    ("header", "basic,nosuch", "X-Toolbridge-Tools"),
    ("metadata", "-nosuch", "metadata.toolbridge_tools"),
])
def test_a_name_that_matches_nothing_is_a_400_naming_it(
    chooser: Gateway, upstream: FakeUpstream, where: str, value: str, param: str
) -> None:
    upstream.script()
    client = chooser.client(default_headers={"X-Toolbridge-Tools": value} if where == "header" else {})
    extra: dict[str, Any] = {"metadata": {"toolbridge_tools": value}} if where == "metadata" else {}
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}], **extra)
    error = caught.value.body
    assert isinstance(error, dict) and error["param"] == param and "'nosuch'" in error["message"]
    assert upstream.chat_requests() == []


@pytest.mark.parametrize(("value", "said"), [
    ("évil,basic".encode(), "names 'évil', which is no MCP server"),  # UTF-8 on the wire, not read as Latin-1
    (b"-", "has a '-' with no name after it"),
    (b"basic, -", "has a '-' with no name after it"),
], ids=["utf-8", "dash", "trailing-dash"])
def test_a_bad_header_is_echoed_as_sent(chooser: Gateway, upstream: FakeUpstream, value: bytes, said: str) -> None:
    upstream.script()
    for response in (
        httpx.post(f"{chooser.url}/v1/chat/completions", headers={"X-Toolbridge-Tools": value},
                   json={"model": MODEL, "messages": [{"role": "user", "content": "x"}]}),
        httpx.get(f"{chooser.url}/tools", headers={"X-Toolbridge-Tools": value}),
    ):
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert said in error["message"] and "Ã" not in error["message"] and "''" not in error["message"]
        assert error["param"] == "X-Toolbridge-Tools"
    assert upstream.chat_requests() == []


def test_the_tools_route_shows_what_a_request_would_be_offered(chooser: Gateway, upstream: FakeUpstream) -> None:
    def listed(**options: Any) -> list[str]:
        response = httpx.get(f"{chooser.url}/tools", **options)
        assert response.status_code == 200, response.text
        return [t["function"]["name"] for t in response.json()["data"]]

    assert len(listed()) == 2 * len(BASIC_TOOLS)
    assert listed(params={"model": f"{MODEL}+pick"}) == ["basic__echo", "other__add"]
    assert listed(params={"model": f"{MODEL}+pick"}, headers={"X-Toolbridge-Tools": "-other"}) == ["basic__echo"]
    upstream.script(Turn(content="ok"))
    chooser.client().chat.completions.create(model=f"{MODEL}+pick", messages=[{"role": "user", "content": "x"}])
    assert offered(upstream) == listed(params={"model": f"{MODEL}+pick"})


def test_a_bad_toolsets_setting_is_refused_at_start(tmp_path: Path) -> None:
    from pydantic import ValidationError

    from tests.conftest import make_settings

    for toolsets in ({"a+b": ["x"]}, {"empty": []}):
        with pytest.raises(ValidationError, match="toolset"):
            make_settings(tmp_path, None, toolsets=toolsets)


# The pure rules (app/chat/toolsets.py).
KNOWN = {"fs", "time", "fetch", "fs__read_file"}.__contains__


@pytest.mark.parametrize(("model", "expected"), [
    ("qwen3-8b+clock", ("qwen3-8b", "clock")),
    ("qwen3-8b", ("qwen3-8b", None)),
    ("org/model+v2+clock", ("org/model+v2", "clock")),
    ("model+unknown", ("model+unknown", None)),  # not a toolset: a model id of its own
    ("+clock", ("+clock", None)),
    (None, (None, None)),
])
def test_virtual_model_names(model: str | None, expected: tuple[str | None, str | None]) -> None:
    assert split_model(model, {"clock": ["time"]}) == expected


@pytest.mark.parametrize(("body", "header", "expected"), [
    ({"model": "m"}, None, ToolSelection()),
    ({"model": "m+files"}, None, ToolSelection((frozenset({"fs", "fetch"}),))),
    ({"model": "m"}, "time, -fs__read_file", ToolSelection((frozenset({"time"}),), frozenset({"fs__read_file"}))),
    ({"model": "m"}, "-files", ToolSelection((), frozenset({"fs", "fetch"}))),
    ({"model": "m+files"}, "fs", ToolSelection((frozenset({"fs", "fetch"}), frozenset({"fs"})))),
    ({"model": "m", "metadata": {"toolbridge_tools": "time"}}, "fs",
     ToolSelection((frozenset({"fs"}), frozenset({"time"})))),
])
def test_what_a_request_chooses(body: dict, header: str | None, expected: ToolSelection) -> None:
    turn = ChatTurn.read({**body, "messages": [{"role": "user", "content": "hi"}]}, Caller(tools=header))
    chosen = choose_tools(turn.model, turn.sent.get("metadata"), header, {"files": ["fs", "fetch"]}, KNOWN)
    upstream_body = turn.chosen(chosen).sent
    assert chosen.selection == expected
    assert upstream_body["model"] == "m" and "metadata" not in upstream_body
    assert turn.sent == {**body, "messages": [{"role": "user", "content": "hi"}]}  # what the client sent, kept


def test_a_metadata_choice_must_be_text() -> None:
    with pytest.raises(InvalidRequest):
        choose_tools(None, {"toolbridge_tools": ["fs"]}, None, {}, KNOWN)


@pytest.mark.parametrize(("selection", "name", "server", "admitted"), [
    (ToolSelection(), "x", "s", True),
    (ToolSelection((frozenset({"s"}),)), "x", "s", True),
    (ToolSelection((frozenset({"s"}), frozenset({"y"}))), "x", "s", False),  # every source must agree
    (ToolSelection((), frozenset({"x"})), "x", "s", False),
    (ToolSelection((frozenset({"s"}),), frozenset({"x"})), "x", "s", False),
])
def test_a_selection_admits_a_tool_by_its_name_or_its_server(
    selection: ToolSelection, name: str, server: str, admitted: bool
) -> None:
    assert selection.admits(name, server) is admitted


def test_virtual_models_follow_their_model_and_keep_its_fields() -> None:
    body = json.dumps({"object": "list", "data": [{"id": "a", "owned_by": "me", "context_length": 8192}]}).encode()
    listed = json.loads(with_virtual_models(body, {"x": ["s"], "y": ["t"]}))["data"]
    assert listed == [{"id": "a", "owned_by": "me", "context_length": 8192},
                      {"id": "a+x", "owned_by": "me", "context_length": 8192},
                      {"id": "a+y", "owned_by": "me", "context_length": 8192}]
    named = json.dumps({"data": [{"id": "a", "name": "Model A"}]}).encode()
    entries = json.loads(with_virtual_models(named, {"x": ["s"]}))["data"]
    assert [e["name"] for e in entries] == ["Model A", "Model A + x"]
    assert with_virtual_models(b"not json", {"x": ["s"]}) == b"not json"
    assert with_virtual_models(body, {}) is body


@pytest.mark.parametrize(("selection", "servers"), [
    (ToolSelection(), {"fs", "time"}),
    (ToolSelection((frozenset({"fs", "fetch"}),)), {"fs"}),
    (ToolSelection((frozenset({"fs__read_file"}),)), set()),  # a tool of a server: its prompts stay out
    (ToolSelection((frozenset({"fs", "time"}), frozenset({"time"}))), {"time"}),
    (ToolSelection((), frozenset({"fs"})), {"time"}),
    (ToolSelection((), frozenset({"fs__read_file"})), {"fs", "time"}),  # leaving out one tool keeps the server's
])
def test_the_servers_whose_prompts_and_resources_a_choice_gives(selection: ToolSelection, servers: set[str]) -> None:
    assert {server for server in ("fs", "time") if selection.admits_server(server)} == servers
