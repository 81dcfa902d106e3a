"""What each key may use, through a running gateway with real stdio servers: two keys of a keys file with
different servers, and an operator's key of TOOLBRIDGE_API_KEYS. A test per route: each key sees and calls its
own servers alone. Then the file changed while the gateway runs, a bad file on reload, and at start."""

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from app.cli import main
from tests.conftest import Gateway, running_gateway, servers_ready, stdio_entry, wait_for_health
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn

ALICE, BOB, OPS = "sk-alice-7f3a9c", "sk-bob-51e0d2", "sk-ops-c0ffee"
SERVERS = {"basic": stdio_entry("basic.py"), "files": stdio_entry("files.py"), "library": stdio_entry("library.py")}
OWN = {ALICE: {"basic", "files"}, BOB: {"library"}, OPS: {"basic", "files", "library"}}
JSON = {"Content-Type": "application/json"}
DEADLINE = 20.0


def keys_file(path: Path, alice: list[str]) -> Path:
    """Alice by her key and the servers given; Bob by his key's SHA-256 and a toolset."""
    bob = "sha256:" + hashlib.sha256(BOB.encode()).hexdigest()
    path.write_text(json.dumps({"keys": {ALICE: {"servers": alice, "name": "alice"},
                                         bob: {"toolsets": ["shelves"], "name": "bob"}}}))
    return path


@pytest.fixture(scope="module")
def shared(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    tmp = tmp_path_factory.mktemp("key_sets")
    with running_gateway(tmp, SERVERS, ready=tuple(SERVERS), key=OPS, upstream_url=f"{upstream.url}/v1",
                         tool_trace="off", api_keys=OPS, toolsets={"shelves": ["library"]},
                         keys_file=keys_file(tmp / "keys.json", ["basic", "files"])) as gateway:
        yield gateway


def get(gateway: Gateway, key: str, path: str, **params: Any) -> Any:
    """As the status page and scripts read: the key as a bearer token (and as Basic credentials under /ui)."""
    auth = ("", key) if path.startswith("/ui") else None
    headers = {} if auth else {"Authorization": f"Bearer {key}"}
    response = httpx.get(f"{gateway.url}{path}", params=params, headers=headers, auth=auth, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def post(gateway: Gateway, key: str, path: str, body: Any) -> httpx.Response:
    return httpx.post(f"{gateway.url}{path}", json=body, auth=("", key), timeout=30)


def servers_of(tools: list[dict[str, Any]]) -> set[str]:
    return {tool["server"] for tool in tools if not tool.get("client")}


def offered(upstream: FakeUpstream) -> set[str]:
    return {t["function"]["name"].partition("__")[0] for t in upstream.chat_requests()[0].get("tools") or []}


def result_of(upstream: FakeUpstream) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(upstream.chat_requests()[1]["messages"][-1]["content"])
    return answer


@pytest.mark.parametrize(("key", "own", "other"), [(ALICE, "basic__echo", "library__find_note"),
                                                   (BOB, "library__find_note", "basic__echo")])
def test_chat_offers_a_keys_own_servers_and_another_servers_tool_is_unknown(
    shared: Gateway, upstream: FakeUpstream, key: str, own: str, other: str
) -> None:
    arguments = {"text": "hi"} if own.endswith("echo") else {"number": 1}
    upstream.script(Turn(calls=[Call(own, arguments)]), Turn(content="ran"))
    shared.client(key).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "go"}])
    assert offered(upstream) == OWN[key]
    assert result_of(upstream)["status"] == "success"
    upstream.script(Turn(calls=[Call(other, {})]), Turn(content="no"))
    answer = shared.client(key).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "go"}],
                                                        stream=True)
    assert "".join(chunk.choices[0].delta.content or "" for chunk in answer if chunk.choices) == "no"
    envelope = result_of(upstream)
    assert envelope["status"] == "error" and f"no tool named '{other}'" in json.dumps(envelope)
    assert not any(name.startswith(other.partition("__")[0]) for name in envelope.get("similar_tools", []))


def test_chat_takes_another_keys_server_for_no_server_at_all(shared: Gateway) -> None:
    for named in ("library", "nothing-such"):
        client = shared.client(ALICE, default_headers={"X-Toolbridge-Tools": named})
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}])
        assert f"names '{named}', which is no MCP server, tool or toolset" in str(refused.value)


def test_models_list_the_toolsets_a_key_may_use(shared: Gateway) -> None:
    listed = {key: [model.id for model in shared.client(key).models.list()] for key in OWN}
    assert listed == {ALICE: [MODEL], BOB: [MODEL, f"{MODEL}+shelves"], OPS: [MODEL, f"{MODEL}+shelves"]}


def test_slash_commands_run_a_keys_own_prompts_alone(shared: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="Hello Ann"))
    shared.client(BOB).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "/greet name=Ann"}])
    assert upstream.chat_requests()[0]["messages"][-1]["content"] == "Write a plain greeting for Ann."
    upstream.script(Turn(content="what?"))
    shared.client(ALICE).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "/greet name=Ann"}])
    assert upstream.chat_requests()[0]["messages"][-1]["content"] == "/greet name=Ann"  # no prompt of hers: as typed


@pytest.mark.parametrize("key", [ALICE, BOB, OPS])
def test_get_and_post_tools_list_a_keys_own_servers(shared: Gateway, key: str) -> None:
    assert servers_of(get(shared, key, "/tools")["data"]) == OWN[key]
    assert servers_of(get(shared, key, "/tools", q="find a note")["data"]) == OWN[key]
    body = {"model": MODEL, "messages": [{"role": "user", "content": "x"}]}
    posted = httpx.post(f"{shared.url}/tools", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert servers_of(posted.json()["data"]) == OWN[key]


@pytest.mark.parametrize("key", [ALICE, BOB, OPS])
def test_prompts_and_resources_are_a_keys_own_servers(shared: Gateway, key: str) -> None:
    prompts = {prompt["server"] for prompt in get(shared, key, "/prompts")["data"]}
    resources = {listing["server"] for listing in get(shared, key, "/resources")["data"]}
    assert prompts == resources == OWN[key] & {"library"}  # the one server with prompts and resources


@pytest.mark.parametrize("path", ["/health", "/ui/health"])
@pytest.mark.parametrize("key", [ALICE, BOB, OPS])
def test_health_shows_a_keys_own_servers_and_the_files_to_the_operator_alone(shared: Gateway, path: str,
                                                                             key: str) -> None:
    health = get(shared, key, path)
    assert set(health["servers"]) == OWN[key]
    assert health["tools"] == len(get(shared, key, "/tools")["data"])
    assert ("keys_file" in health) == ("mcp_config" in health) == (key == OPS)
    assert ALICE not in json.dumps(health) and BOB not in json.dumps(health)


@pytest.mark.parametrize("key", [ALICE, BOB, OPS])
def test_the_status_pages_tools_and_server_events_are_a_keys_own(shared: Gateway, key: str) -> None:
    assert servers_of(get(shared, key, "/ui/tools")["data"]) == OWN[key]
    with httpx.stream("GET", f"{shared.url}/ui/events", auth=("", key), timeout=30) as stream:
        lines = stream.iter_lines()
        event = next(line for line in lines if line.startswith("data:"))
    assert set(json.loads(event.removeprefix("data:"))) == OWN[key]


def test_a_key_restarts_its_own_servers_alone(shared: Gateway) -> None:
    refused = httpx.post(f"{shared.url}/ui/servers/library/restart", auth=("", ALICE), headers=JSON, timeout=30)
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "server_not_found"
    before = get(shared, OPS, "/health")["servers"]["basic"].get("restarts", 0)
    assert httpx.post(f"{shared.url}/ui/servers/basic/restart", auth=("", ALICE), headers=JSON,
                      timeout=30).status_code == 202
    wait_for_health(shared.url, lambda b: servers_ready("basic")(b) and b["servers"]["basic"].get("restarts")
                    == before + 1, key=OPS)
    assert get(shared, OPS, "/health")["servers"]["library"].get("restarts", 0) == 0


def test_the_playground_runs_a_keys_own_tools_alone(shared: Gateway) -> None:
    ran = post(shared, ALICE, "/ui/playground", {"tool": "basic__echo", "arguments": {"text": "mine"}}).json()
    assert ran["is_error"] is False and json.loads(ran["content"])["data"] == {"result": "echo: mine"}
    other = post(shared, ALICE, "/ui/playground", {"tool": "library__find_note", "arguments": {"number": 1}}).json()
    assert other["is_error"] is True and "no tool named 'library__find_note'" in other["content"]


def test_recent_calls_and_requests_are_a_keys_own_and_the_operator_sees_all(
    shared: Gateway, upstream: FakeUpstream
) -> None:
    numbers = {key: max([c["number"] for c in get(shared, OPS, "/ui/calls")["data"]], default=0) for key in OWN}
    requests_before = max([r["number"] for r in get(shared, OPS, "/ui/requests")["data"]], default=0)
    for key, tool, arguments in ((ALICE, "basic__add", {"a": 1, "b": 2}), (BOB, "library__find_note", {"number": 2})):
        upstream.script(Turn(calls=[Call(tool, arguments)]), Turn(content="done"))
        shared.client(key).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "go"}])
    seen = {key: [(c["server"], c["tool"]) for c in get(shared, key, "/ui/calls", after=numbers[key])["data"]]
            for key in OWN}
    assert seen == {ALICE: [("basic", "add")], BOB: [("library", "find_note")],
                    OPS: [("basic", "add"), ("library", "find_note")]}
    requests = {key: len(get(shared, key, "/ui/requests", after=requests_before)["data"]) for key in OWN}
    assert requests == {ALICE: 1, BOB: 1, OPS: 2}


def test_waiting_rounds_are_the_asking_keys_own(shared: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(calls=[Call("files__delete_note", {"name": "plans"})]))
    shared.client(ALICE).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "delete plans"}])
    (held,) = [r for r in get(shared, ALICE, "/ui/waiting")["data"] if "plans" in r["calls"][0]["arguments"]]
    assert get(shared, BOB, "/ui/waiting")["data"] == []
    refused = post(shared, BOB, f"/ui/waiting/{held['id']}", {"verdict": "approve"})
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "waiting_not_found"


def test_the_metrics_which_name_every_server_are_the_operators(shared: Gateway) -> None:
    for key, status in ((ALICE, 403), (BOB, 403), (OPS, 200)):
        response = httpx.get(f"{shared.url}/metrics", headers={"Authorization": f"Bearer {key}"}, timeout=30)
        assert response.status_code == status
    assert 'server="library"' in response.text


def test_a_keys_file_alone_asks_every_caller_for_a_key_and_keeps_each_keys_rounds_apart(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    path = keys_file(tmp_path / "keys.json", ["files"])
    with running_gateway(tmp_path, {"files": SERVERS["files"]}, upstream_url=f"{upstream.url}/v1",
                         tool_trace="off", toolsets={"shelves": ["library"]}, keys_file=path) as gateway:
        assert httpx.get(f"{gateway.url}/tools", timeout=30).status_code == 401
        wait_for_health(gateway.url, servers_ready("files"), key=ALICE)
        upstream.script(Turn(calls=[Call("files__delete_note", {"name": "plans"})]))
        gateway.client(ALICE).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "rm"}])
        assert len(get(gateway, ALICE, "/ui/waiting")["data"]) == 1
        assert get(gateway, BOB, "/ui/waiting")["data"] == []  # not one anonymous owner for all


def until(check: Callable[[], bool], what: str) -> None:
    """Bounded: the watcher re-reads the file a moment after it is written."""
    deadline = time.monotonic() + DEADLINE
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_the_keys_file_is_reloaded_while_running_and_a_bad_one_keeps_the_last_good(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    path = keys_file(tmp_path / "keys.json", ["basic"])
    with running_gateway(tmp_path, {"basic": SERVERS["basic"], "library": SERVERS["library"]},
                         ready=("basic", "library"), key=OPS, upstream_url=f"{upstream.url}/v1", api_keys=OPS,
                         toolsets={"shelves": ["library"]}, keys_file=path) as gateway:
        alice_sees: Callable[[], set[str]] = lambda: servers_of(get(gateway, ALICE, "/tools")["data"])  # noqa: E731
        assert alice_sees() == {"basic"}
        keys_file(path, ["basic", "library"])
        until(lambda: alice_sees() == {"basic", "library"}, "the new file was not read")
        path.write_text('{"keys": {"' + ALICE + '": {"servers": "basic"}}}')  # a bad one: servers not a list
        until(lambda: "error" in get(gateway, OPS, "/health")["keys_file"], "the bad file was not noticed")
        health = get(gateway, OPS, "/health")
        assert health["status"] == "degraded" and ALICE not in json.dumps(health)
        assert 'key #1: servers must be a list of server names, or "*"' in health["keys_file"]["error"]
        assert alice_sees() == {"basic", "library"}  # the last good file stays in force
        with httpx.stream("GET", f"{gateway.url}/ui/events", auth=("", ALICE), timeout=30) as stream:
            lines = stream.iter_lines()
            assert set(json.loads(next(line for line in lines if line.startswith("data:"))[5:])) == {"basic", "library"}
            path.write_text(json.dumps({"keys": {}}))  # Alice taken out
            until(lambda: httpx.get(f"{gateway.url}/tools", headers={"Authorization": f"Bearer {ALICE}"},
                                    timeout=30).status_code == 401, "a key taken out still works")
            post(gateway, OPS, "/ui/playground", {"tool": "basic__echo", "arguments": {"text": "after"}})
            # Her open stream ends, unsent (the first event, or its end, whichever comes first).
            assert next((line for line in lines if line.startswith("event:")), None) is None
        assert "error" not in get(gateway, OPS, "/health")["keys_file"]


@pytest.mark.parametrize(("content", "problem"), [
    (None, "no such file"),
    ("{not json", "not JSON"),
    (json.dumps({"keys": {ALICE: {"servers": ["basic"], "tools": ["x"]}}}),
     'key #1: unknown field "tools" (did you mean "toolsets"?)'),
    (json.dumps({"keys": {ALICE: {"toolsets": ["nope"]}}}), "key #1: toolset 'nope' is not one of"),
    (json.dumps({"keys": {OPS: {"servers": ["basic"]}}}), "key #1 also in TOOLBRIDGE_API_KEYS"),
])
def test_a_bad_keys_file_stops_the_start_naming_the_problem_and_no_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, problem: str
) -> None:
    path = tmp_path / "keys.json"
    if content is not None:
        path.write_text(content)
    assert main(["--keys-file", str(path), "--api-keys", OPS, "--mcp-config", str(tmp_path / "none.json")]) == 2
    said = capsys.readouterr().err
    assert said.startswith(f"toolbridge: keys file {path}: ") and problem in said
    assert ALICE not in said and OPS not in said
