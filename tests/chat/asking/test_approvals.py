"""Approvals as a person sees them: a real MCP server over stdio (tests/support/mcp_servers/files.py: `delete_note`
is annotated destructive, so it asks first under the default TOOLBRIDGE_CONFIRM), a scripted upstream, and the
openai SDK as the client, whole and streamed; then two gateways on one Redis, the yes reaching the other one."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from app.chat.asking.approvals import DECLINED
from tests.chat.memory.test_memory import after_system, ask
from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.support.replica_services import RedisServer

SERVERS = {"files": stdio_entry("files.py")}
DELETE = Turn(content="Deleting it.", calls=[Call("files__delete_note", {"name": "list"})])


@pytest.fixture(scope="module")
def notes(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with running_gateway(tmp_path_factory.mktemp("notes"), SERVERS, ready=["files"],
                         upstream_url=f"{upstream.url}/v1", tool_trace="off") as gateway:
        yield gateway


def conversation(client: openai.OpenAI, upstream: FakeUpstream, stream: bool, name: str) -> list[dict[str, Any]]:
    """A note written (no yes needed: write_note is not annotated destructive), then its deletion asked for."""
    write = Turn(content="Writing it.", calls=[Call("files__write_note", {"name": name, "text": "milk"})])
    upstream.script(write, Turn(content="Written."))
    history: list[dict[str, Any]] = [{"role": "user", "content": f"Write a note {name}."}]
    history.append({"role": "assistant", "content": ask(client, history, stream=stream)})
    history.append({"role": "user", "content": f"Now delete {name}."})
    upstream.script(Turn(content="Deleting it.", calls=[Call("files__delete_note", {"name": name})]))
    history.append({"role": "assistant", "content": ask(client, history, stream=stream)})
    return history


def results(upstream: FakeUpstream) -> list[str]:
    """The tool results the model was given in the last request."""
    return [m["content"] for m in upstream.chat_requests()[-1]["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_destructive_tool_asks_and_yes_runs_it(notes: Gateway, upstream: FakeUpstream, stream: bool) -> None:
    client = notes.client()
    history = conversation(client, upstream, stream, f"yes-{stream}")
    question = history[-1]["content"]
    assert question.startswith("Deleting it.\n\nThe model wants to run a tool that needs your approval")
    assert f'**files__delete_note** on the server **files**, with\n  - name: `"yes-{stream}"`' in question
    assert len(upstream.chat_requests()) == 1  # nothing ran: the model was not asked again

    upstream.script(Turn(content="Deleted."))
    answer = ask(client, [*history, {"role": "user", "content": "yes"}], stream=stream)
    assert answer == "Deleted."
    seen = after_system(upstream.chat_requests()[0]["messages"])
    assert [m["role"] for m in seen] == ["user", "assistant", "tool", "assistant", "user", "assistant", "tool"]
    assert json.loads(seen[-1]["content"])["data"] == {"result": f"deleted 'yes-{stream}'"}
    assert "approval" not in json.dumps(seen) and seen[4]["content"] == f"Now delete yes-{stream}."


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_no_runs_nothing_and_the_note_is_still_there(notes: Gateway, upstream: FakeUpstream, stream: bool) -> None:
    client = notes.client()
    name = f"no-{stream}"
    history = conversation(client, upstream, stream, name)
    upstream.script(Turn(content="I left it.", calls=[Call("files__read_note", {"name": name})]),
                    Turn(content="It still says milk."))
    answer = ask(client, [*history, {"role": "user", "content": "No."}], stream=stream)
    assert answer == "I left it.\n\nIt still says milk."
    first = upstream.chat_requests()[0]
    assert len(upstream.chat_requests()) == 2
    assert [m["content"] for m in first["messages"] if m["role"] == "tool"][-1] == DECLINED
    assert json.loads(results(upstream)[-1])["data"] == {"result": "milk"}  # the delete never ran


def test_a_second_yes_runs_nothing_more(notes: Gateway, upstream: FakeUpstream) -> None:
    client = notes.client()
    history = conversation(client, upstream, False, "twice")
    answered = [*history, {"role": "user", "content": "yes"}]
    upstream.script(Turn(content="Deleted."))
    ask(client, answered, stream=False)
    upstream.script(Turn(content="Deleted again."))
    again = ask(client, answered, stream=False)  # a retry of the same request
    assert "Nothing was run" in again and upstream.chat_requests() == []


def test_a_yes_from_another_key_runs_nothing(upstream: FakeUpstream, tmp_path: Path) -> None:
    with running_gateway(tmp_path, SERVERS, ready=["files"], key="sk-alice", upstream_url=f"{upstream.url}/v1",
                         tool_trace="off", api_keys="sk-alice,sk-mallory") as gateway:
        history = conversation(gateway.client("sk-alice"), upstream, False, "keyed")
        upstream.script(Turn(content="Deleted."))
        answer = ask(gateway.client("sk-mallory"), [*history, {"role": "user", "content": "yes"}], stream=False)
        assert "asked under another API key" in answer and upstream.chat_requests() == []


def test_the_trace_shows_the_waiting_call(notes: Gateway, upstream: FakeUpstream) -> None:
    client = notes.client(default_headers={"X-Toolbridge-Trace": "details"})
    upstream.script(DELETE)
    content = ask(client, [{"role": "user", "content": "Delete list."}], stream=True)
    assert '<details data-toolbridge="waiting" data-name="files__delete_note" data-arguments=' in content
    assert "files__delete_note: waiting for your approval" in content
    upstream.script(Turn(content="Deleted."))
    streamed = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Delete list."}, {"role": "assistant", "content": content},
                             {"role": "user", "content": "yes"}], stream=True)
    later = "".join(chunk.choices[0].delta.content or "" for chunk in streamed if chunk.choices)
    assert 'name="files__delete_note"' in later and 'done="true"' in later and later.endswith("Deleted.")


def test_a_yes_reaching_the_other_replica_runs_the_call_once(
    redis_server: RedisServer, upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory
) -> None:
    settings: dict[str, Any] = {"upstream_url": f"{upstream.url}/v1", "tool_trace": "off",
                                "state_url": redis_server.url}
    with (running_gateway(tmp_path_factory.mktemp("a"), SERVERS, ready=["files"], **settings) as a,
          running_gateway(tmp_path_factory.mktemp("b"), SERVERS, ready=["files"], **settings) as b):
        upstream.script(DELETE)
        history = [{"role": "user", "content": "Delete list."}]
        history.append({"role": "assistant", "content": ask(a.client(), history, stream=False)})
        answered = [*history, {"role": "user", "content": "yes"}]
        upstream.script(Turn(content="Done."))
        assert ask(b.client(), answered, stream=True) == "Done."
        assert json.loads(results(upstream)[-1])["data"] == {"result": "no note 'list'"}  # B's server ran it
        upstream.script(Turn(content="Done again."))
        assert "Nothing was run" in ask(a.client(), answered, stream=False)
        assert upstream.chat_requests() == []
