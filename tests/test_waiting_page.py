"""The status page's waiting calls, as a person uses them: a real MCP server over stdio
(tests/support/mcp_servers/files.py: `delete_note` is annotated destructive, so it asks first under the default
TOOLBRIDGE_CONFIRM), a scripted upstream, the openai SDK as the chat client, and the page's own requests (the key
as a Basic password, declared JSON) made with httpx: the chat asks, the page approves or denies, the chat's next
message finds it decided; and two gateways on one Redis, the page's verdict given on one, the message reaching the
other."""

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.chat.asking.approvals import DECLINED
from tests.chat.asking.test_approvals import SERVERS, conversation, results
from tests.chat.memory.test_memory import after_system, ask
from tests.conftest import Gateway, running_gateway
from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.support.replica_services import RedisServer

ALICE, MALLORY = "sk-alice", "sk-mallory"
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def keyed(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with running_gateway(tmp_path_factory.mktemp("waiting"), SERVERS, ready=["files"], key=ALICE,
                         upstream_url=f"{upstream.url}/v1", tool_trace="off", api_keys=f"{ALICE},{MALLORY}") as gateway:
        yield gateway


def page(gateway: Gateway, key: str) -> httpx.Client:
    """What the status page sends: the key as the password of HTTP Basic credentials."""
    return httpx.Client(base_url=gateway.url, auth=("", key), timeout=10)


def waiting(gateway: Gateway, key: str) -> list[dict[str, Any]]:
    with page(gateway, key) as client:
        listed = client.get("/ui/waiting")
    assert listed.status_code == 200
    data: list[dict[str, Any]] = listed.json()["data"]
    return data


def decide(gateway: Gateway, key: str, round_id: str, verdict: str, headers: dict[str, str] = JSON) -> httpx.Response:
    with page(gateway, key) as client:
        return client.post(f"/ui/waiting/{round_id}", content=json.dumps({"verdict": verdict}), headers=headers)


def asked(
    gateway: Gateway, upstream: FakeUpstream, name: str, stream: bool = False
) -> tuple[list[dict[str, Any]], str]:
    """Alice's chat: a note written, its deletion asked for. The history, and the waiting round's id."""
    history = conversation(gateway.client(ALICE), upstream, stream, name)
    (held,) = [held for held in waiting(gateway, ALICE) if name in held["calls"][0]["arguments"]]
    assert held["calls"] == [{"tool": "files__delete_note", "server": "files", "arguments": json.dumps({"name": name})}]
    assert held["decided"] is None and "turn" not in json.dumps(held)
    assert history[-1]["content"].endswith(f"(Approval {held['reference']}.)")  # the chat's question names it
    return history, held["id"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_approved_on_the_page_the_next_message_runs_the_call(
    keyed: Gateway, upstream: FakeUpstream, stream: bool
) -> None:
    name = f"approved-{stream}"
    history, round_id = asked(keyed, upstream, name, stream)
    decided = decide(keyed, ALICE, round_id, "approve")
    assert decided.status_code == 200 and decided.json() == {"id": round_id, "decided": "approve"}
    assert decide(keyed, ALICE, round_id, "deny").json()["decided"] == "approve"  # the first verdict stands

    client = keyed.client(ALICE)
    thanks = {"role": "user", "content": "thanks"}
    upstream.script(Turn(content="You are welcome."))
    answer = ask(client, [*history, thanks], stream=stream)
    assert answer == "You are welcome."
    seen = after_system(upstream.chat_requests()[0]["messages"])
    assert [m["role"] for m in seen][-3:] == ["assistant", "tool", "user"]
    assert json.loads(seen[-2]["content"])["data"] == {"result": f"deleted '{name}'"} and seen[-1] == thanks
    assert [held for held in waiting(keyed, ALICE) if held["id"] == round_id] == []  # taken up

    # The next turn: the model sees the call's real result before "thanks", and the note is gone.
    upstream.script(Turn(content="Checking.", calls=[Call("files__read_note", {"name": name})]), Turn(content="Gone."))
    ask(client, [*history, thanks, {"role": "assistant", "content": answer},
                 {"role": "user", "content": "Is it gone?"}], stream=stream)
    later = after_system(upstream.chat_requests()[0]["messages"])
    assert later[len(seen) - 2] == seen[-2] and later[len(seen) - 1] == thanks
    assert json.loads(results(upstream)[-1])["data"] == {"result": f"no note '{name}'"}


def test_denied_on_the_page_the_call_never_runs(keyed: Gateway, upstream: FakeUpstream) -> None:
    name = "denied"
    history, round_id = asked(keyed, upstream, name)
    assert decide(keyed, ALICE, round_id, "deny").json()["decided"] == "deny"
    upstream.script(Turn(content="Checking.", calls=[Call("files__read_note", {"name": name})]),
                    Turn(content="It still says milk."))
    ask(keyed.client(ALICE), [*history, {"role": "user", "content": "What does it say now?"}], stream=False)
    first = [m["content"] for m in upstream.chat_requests()[0]["messages"] if m["role"] == "tool"]
    assert first[-1] == DECLINED
    assert json.loads(results(upstream)[-1])["data"] == {"result": "milk"}


def test_another_key_sees_nothing_and_cannot_decide(keyed: Gateway, upstream: FakeUpstream) -> None:
    history, round_id = asked(keyed, upstream, "mine")
    assert waiting(keyed, MALLORY) == []
    refused = decide(keyed, MALLORY, round_id, "approve")
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "waiting_not_found"
    assert decide(keyed, ALICE, "no-such-id", "approve").status_code == 404
    # Not declared JSON, as a form or a no-cors fetch from another page would send it: refused before the route.
    plain = decide(keyed, ALICE, round_id, "approve", headers={"Content-Type": "text/plain"})
    assert plain.status_code == 400 and plain.json()["error"]["code"] == "invalid_content_type"
    bad = decide(keyed, ALICE, round_id, "maybe")
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "verdict"
    with httpx.Client(base_url=keyed.url, timeout=10) as anonymous:
        assert anonymous.get("/ui/waiting").status_code == 401
    assert [held["decided"] for held in waiting(keyed, ALICE) if held["id"] == round_id] == [None]

    upstream.script(Turn(content="Hello."))
    ask(keyed.client(ALICE), [*history, {"role": "user", "content": "hi"}], stream=False)
    assert not any("deleted" in content for content in results(upstream))  # undecided: nothing ran


def test_approved_on_one_replica_the_message_reaching_the_other_runs_it(
    redis_server: RedisServer, upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory
) -> None:
    settings: dict[str, Any] = {"upstream_url": f"{upstream.url}/v1", "tool_trace": "off",
                                "state_url": redis_server.url, "api_keys": ALICE}
    with (running_gateway(tmp_path_factory.mktemp("a"), SERVERS, ready=["files"], key=ALICE, **settings) as a,
          running_gateway(tmp_path_factory.mktemp("b"), SERVERS, ready=["files"], key=ALICE, **settings) as b):
        upstream.script(Turn(content="Deleting it.", calls=[Call("files__delete_note", {"name": "replicated"})]))
        history = [{"role": "user", "content": "Delete replicated."}]
        history.append({"role": "assistant", "content": ask(a.client(ALICE), history, stream=False)})
        (held,) = waiting(a, ALICE)
        assert waiting(b, ALICE) == []  # the list is the asking replica's
        assert decide(a, ALICE, held["id"], "approve").json()["decided"] == "approve"
        upstream.script(Turn(content="Done."))
        assert ask(b.client(ALICE), [*history, {"role": "user", "content": "thanks"}], stream=False) == "Done."
        assert json.loads(results(upstream)[-1])["data"] == {"result": "no note 'replicated'"}  # B's server ran it


def test_a_round_the_chat_took_up_on_the_other_replica_leaves_the_page_and_a_late_verdict_is_refused(
    redis_server: RedisServer, upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # The chat's next message marks the verdict's place in the shared store: the page's verdict after it says
    # so (it decided nothing), and the asking replica's list drops the round at its next look.
    settings: dict[str, Any] = {"upstream_url": f"{upstream.url}/v1", "tool_trace": "off",
                                "state_url": redis_server.url, "api_keys": ALICE}
    with (running_gateway(tmp_path_factory.mktemp("a"), SERVERS, ready=["files"], key=ALICE, **settings) as a,
          running_gateway(tmp_path_factory.mktemp("b"), SERVERS, ready=["files"], key=ALICE, **settings) as b):
        upstream.script(Turn(content="Deleting it.", calls=[Call("files__delete_note", {"name": "raced"})]))
        history = [{"role": "user", "content": "Delete raced."}]
        history.append({"role": "assistant", "content": ask(a.client(ALICE), history, stream=False)})
        (held,) = waiting(a, ALICE)
        upstream.script(Turn(content="Sunny."))
        assert ask(b.client(ALICE), [*history, {"role": "user", "content": "Weather?"}], stream=True) == "Sunny."
        late = decide(a, ALICE, held["id"], "approve")
        assert late.status_code == 409 and late.json()["error"]["code"] == "waiting_taken_up"
        assert waiting(a, ALICE) == []
        upstream.script(Turn(content="Asked again."))
        history += [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": "Sunny."}]
        ask(a.client(ALICE), [*history, {"role": "user", "content": "ok"}], stream=False)
    assert "no note" not in json.dumps(results(upstream))  # the delete never ran
