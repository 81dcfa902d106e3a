"""Grants as a person sees them (issue 48): a real MCP server over stdio (tests/support/mcp_servers/files.py:
`delete_note` is annotated destructive, so it asks first), a scripted upstream, the openai SDK as the client, and the
status page's own requests (the key as a Basic password, declared JSON): "yes for this chat" asks once for two later
calls, "always" holds in other chats and is listed and revoked on the page, "never" refuses unasked, "yes, but"
runs the changed call; a grant given on one replica holds on the other, and one kept in SQLite outlives a restart.
Each grant kind's length, to the second, is tests/chat/loop/test_approvals_loop.py's (a fake clock)."""

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.chat.asking.test_approvals import SERVERS, results
from tests.chat.memory.test_memory import ask
from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.support.replica_services import RedisServer

ALICE, BOB = "sk-alice", "sk-bob"
JSON = {"Content-Type": "application/json"}
ASKING = "needs your approval"


def delete(name: str) -> Turn:
    return Turn(content="Deleting it.", calls=[Call("files__delete_note", {"name": name})])


def keyed_gateway(tmp: Path, upstream: FakeUpstream, **settings: Any) -> Any:
    return running_gateway(tmp, SERVERS, ready=["files"], key=ALICE, upstream_url=f"{upstream.url}/v1",
                           tool_trace="off", api_keys=f"{ALICE},{BOB}", **settings)


def answered(gateway: Gateway, upstream: FakeUpstream, reply: str, *, stream: bool = False,
             key: str = ALICE) -> list[dict[str, Any]]:
    """A chat whose model deletes `first`: asked, answered with `reply`; the history as the client keeps it."""
    client = gateway.client(key)
    upstream.script(delete("first"))
    history: list[dict[str, Any]] = [{"role": "user", "content": "Delete first."}]
    history.append({"role": "assistant", "content": ask(client, history, stream=stream)})
    assert ASKING in history[-1]["content"]
    history.append({"role": "user", "content": reply})
    upstream.script(Turn(content="Done."))
    history.append({"role": "assistant", "content": ask(client, history, stream=stream)})
    return history


def grants(gateway: Gateway, key: str) -> list[dict[str, Any]]:
    with httpx.Client(base_url=gateway.url, auth=("", key), timeout=10) as page:
        listed = page.get("/ui/grants")
    assert listed.status_code == 200
    data: list[dict[str, Any]] = listed.json()["data"]
    return data


def revoke(gateway: Gateway, key: str, grant_id: str) -> httpx.Response:
    with httpx.Client(base_url=gateway.url, auth=("", key), timeout=10) as page:
        return page.post(f"/ui/grants/{grant_id}/revoke", headers=JSON)


def deleted(upstream: FakeUpstream) -> list[Any]:
    return [json.loads(content)["data"] for content in results(upstream) if content.startswith("{")]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_yes_for_this_chat_asks_once_for_two_later_calls_in_it(
    upstream: FakeUpstream, tmp_path: Path, stream: bool
) -> None:
    with keyed_gateway(tmp_path, upstream) as gateway:
        history = answered(gateway, upstream, "yes for this chat", stream=stream)
        history.append({"role": "user", "content": "Now delete second and third."})
        upstream.script(Turn(content="Both.", calls=[Call("files__delete_note", {"name": "second"}),
                                                     Call("files__delete_note", {"name": "third"})]),
                        Turn(content="Deleted both."))
        assert ask(gateway.client(ALICE), history, stream=stream) == "Both.\n\nDeleted both."
        assert deleted(upstream)[-2:] == [{"result": "no note 'second'"}, {"result": "no note 'third'"}]
        upstream.script(delete("fourth"))
        other_chat = ask(gateway.client(ALICE), [{"role": "user", "content": "Delete fourth."}], stream=stream)
        assert ASKING in other_chat  # another chat is asked
        [grant] = grants(gateway, ALICE)
        assert (grant["scope"], grant["tool"], grant["server"], grant["allow"]) == ("chat", "files__delete_note",
                                                                                     "files", True)
        assert "chats" not in grant


def test_always_holds_in_every_chat_of_the_key_is_listed_and_revoked_on_the_page(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    with keyed_gateway(tmp_path, upstream) as gateway:
        answered(gateway, upstream, "always")
        upstream.script(delete("elsewhere"), Turn(content="Gone."))
        assert ask(gateway.client(ALICE), [{"role": "user", "content": "Delete elsewhere."}], stream=False) == (
            "Deleting it.\n\nGone.")
        upstream.script(delete("bobs"))
        assert ASKING in ask(gateway.client(BOB), [{"role": "user", "content": "Delete bobs."}], stream=False)
        [grant] = grants(gateway, ALICE)
        assert grant["scope"] == "always" and grant["described"] == "yes to files__delete_note on files until revoked"
        assert grants(gateway, BOB) == []
        assert revoke(gateway, BOB, grant["id"]).status_code == 404  # not Bob's to revoke
        with httpx.Client(base_url=gateway.url, auth=("", ALICE), timeout=10) as page:
            assert page.post(f"/ui/grants/{grant['id']}/revoke").status_code == 400  # not declared JSON
        assert revoke(gateway, ALICE, grant["id"]).json() == {"id": grant["id"], "revoked": True}
        assert grants(gateway, ALICE) == []
        upstream.script(delete("again"))
        assert ASKING in ask(gateway.client(ALICE), [{"role": "user", "content": "Delete again."}], stream=False)


def test_never_refuses_later_calls_unasked(upstream: FakeUpstream, tmp_path: Path) -> None:
    with keyed_gateway(tmp_path, upstream) as gateway:
        answered(gateway, upstream, "never")
        upstream.script(delete("later"), Turn(content="It was refused."))
        answer = ask(gateway.client(ALICE), [{"role": "user", "content": "Delete later."}], stream=True)
        assert answer == "Deleting it.\n\nIt was refused."
        assert results(upstream) == ["The person declined calls of this tool in advance; this call was not run."]
        assert [grant["allow"] for grant in grants(gateway, ALICE)] == [False]


def test_yes_but_runs_the_call_with_the_changed_argument(upstream: FakeUpstream, tmp_path: Path) -> None:
    with keyed_gateway(tmp_path, upstream) as gateway:
        client = gateway.client(ALICE)
        upstream.script(Turn(content="Writing.", calls=[Call("files__write_note", {"name": "draft", "text": "x"})]),
                        Turn(content="Written."))
        history: list[dict[str, Any]] = [{"role": "user", "content": "Write draft."}]
        history.append({"role": "assistant", "content": ask(client, history, stream=False)})
        history += [{"role": "user", "content": "Delete the wrong one."}]
        upstream.script(delete("wrong"))
        history.append({"role": "assistant", "content": ask(client, history, stream=False)})
        history.append({"role": "user", "content": "yes, but name=draft"})
        upstream.script(Turn(content="Deleted draft."))
        assert ask(client, history, stream=False) == "Deleted draft."
        [result] = [m["content"] for m in upstream.chat_requests()[-1]["messages"] if m["role"] == "tool"][-1:]
        assert result.startswith('(The person changed the arguments before approving this call: name="draft".)\n')
        assert json.loads(result.split("\n", 1)[1])["data"] == {"result": "deleted 'draft'"}
        calls = [m for m in upstream.chat_requests()[-1]["messages"] if m.get("tool_calls")]
        assert json.loads(calls[-1]["tool_calls"][0]["function"]["arguments"]) == {"name": "draft"}
        assert grants(gateway, ALICE) == []  # a yes for this call grants nothing


def test_a_grant_given_on_one_replica_holds_on_the_other(
    redis_server: RedisServer, upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory
) -> None:
    settings: dict[str, Any] = {"state_url": redis_server.url}
    with (keyed_gateway(tmp_path_factory.mktemp("a"), upstream, **settings) as a,
          keyed_gateway(tmp_path_factory.mktemp("b"), upstream, **settings) as b):
        answered(a, upstream, "yes for 2 hours")
        upstream.script(delete("on-b"), Turn(content="Gone on B."))
        assert ask(b.client(ALICE), [{"role": "user", "content": "Delete on-b."}], stream=False).endswith("Gone on B.")
        [grant] = grants(b, ALICE)
        assert grant["scope"] == "timed" and 7190 < grant["expires"] - grant["made"] <= 7200
        assert revoke(b, ALICE, grant["id"]).status_code == 200
        upstream.script(delete("on-a"))
        assert ASKING in ask(a.client(ALICE), [{"role": "user", "content": "Delete on-a."}], stream=False)


def test_a_grant_kept_in_sqlite_outlives_a_restart(upstream: FakeUpstream, tmp_path: Path) -> None:
    with keyed_gateway(tmp_path, upstream) as gateway:
        answered(gateway, upstream, "always")
    with keyed_gateway(tmp_path, upstream) as restarted:
        upstream.script(delete("after"), Turn(content="Gone."))
        assert ask(restarted.client(ALICE), [{"role": "user", "content": "Delete after."}], stream=False).endswith(
            "Gone.")
        assert [grant["scope"] for grant in grants(restarted, ALICE)] == ["always"]


def test_a_grant_record_copied_or_written_by_hand_in_redis_grants_nothing(
    redis_server: RedisServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """Whoever can write to Redis (no TOOLBRIDGE_TOKEN_KEY) copies Bob's "always" over Alice's record, then writes
    one by hand: Alice is still asked (each record is encrypted and sealed to its name: app/state/vault.py)."""
    client = redis_server.client()
    client.flushdb()
    with keyed_gateway(tmp_path, upstream, state_url=redis_server.url) as gateway:
        answered(gateway, upstream, "always", key=BOB)
        [bobs] = client.keys(b"toolbridge:vault:v1:grants/*")
        answered(gateway, upstream, "yes for this chat")  # Alice's record: for that chat only
        [alices] = [name for name in client.keys(b"toolbridge:vault:v1:grants/*") if name != bobs]
        client.set(alices, client.get(bobs))
        upstream.script(delete("copied"))
        assert ASKING in ask(gateway.client(ALICE), [{"role": "user", "content": "Delete copied."}], stream=False)
        client.set(alices, json.dumps({"grants": [{"id": "x", "allow": True, "server": "files", "scope": "always",
                                                   "tool": "files__delete_note", "made": 0}]}).encode())
        upstream.script(delete("by-hand"))
        assert ASKING in ask(gateway.client(ALICE), [{"role": "user", "content": "Delete by-hand."}], stream=False)
        assert grants(gateway, ALICE) == []


def test_a_changed_argument_the_schema_refuses_is_told_to_the_model_as_for_any_call(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    with keyed_gateway(tmp_path, upstream) as gateway:
        client = gateway.client(ALICE)
        upstream.script(delete("list"))
        history: list[dict[str, Any]] = [{"role": "user", "content": "Delete list."}]
        history.append({"role": "assistant", "content": ask(client, history, stream=False)})
        upstream.script(Turn(content="That did not work."))
        ask(client, [*history, {"role": "user", "content": "yes, but name=[1, 2]"}], stream=False)
        [result] = results(upstream)
        assert result.startswith('(The person changed the arguments before approving this call: name=[1, 2].)\n')
        assert json.loads(result.split("\n", 1)[1])["status"] == "error"


def test_always_under_a_path_runs_calls_within_it_unasked_and_asks_outside_it(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    with running_gateway(tmp_path, {"paths": stdio_entry("paths.py")}, ready=["paths"], key=ALICE,
                         upstream_url=f"{upstream.url}/v1", tool_trace="off", api_keys=ALICE) as gateway:
        client = gateway.client(ALICE)

        def removing(path: str) -> str:
            upstream.script(Turn(content="Removing.", calls=[Call("paths__delete_path", {"path": path})]),
                            Turn(content="Removed."))
            return ask(client, [{"role": "user", "content": f"Remove {path}."}], stream=False)

        history: list[dict[str, Any]] = [{"role": "user", "content": "Remove /home/me/notes/old.md."}]
        old = {"path": "/home/me/notes/old.md"}
        upstream.script(Turn(content="Removing.", calls=[Call("paths__delete_path", old)]))
        history.append({"role": "assistant", "content": ask(client, history, stream=False)})
        upstream.script(Turn(content="Removed."))
        ask(client, [*history, {"role": "user", "content": "always for files under /home/me/notes"}], stream=False)
        assert removing("/home/me/notes/sub/new.md") == "Removing.\n\nRemoved."  # within: unasked
        assert json.loads(results(upstream)[-1])["data"] == {"result": "deleted /home/me/notes/sub/new.md"}
        assert ASKING in removing("/home/me/notes/../.ssh/id_ed25519")  # outside, ".." resolved: asked
        [grant] = grants(gateway, ALICE)
        assert grant["under"] == "/home/me/notes" and grant["described"].endswith("for paths under /home/me/notes")
