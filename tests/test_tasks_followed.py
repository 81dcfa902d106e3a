"""Background tasks followed: asked about all at once by the status page's list (GET /ui/tasks, app/mcp/pool.py
`tasks_now`), no more often than their server's pollInterval asks, and by a chat's next turn
(app/chat/loop/background.py); one its server forgot listed as failed. The servers are
tests/support/mcp_servers/tasking.py over stdio, its stages long enough that every task runs on through the test;
one that answers a task's tasks/get only once two are asked at once (or after 5 s, past what the gateway waits) shows
whether they were."""

from collections.abc import Iterator
from typing import Any

import httpx
import psutil
import pytest

from app.chat.ports import TaskMark
from app.mcp.pool import TASK_UNKNOWN
from tests.chat.memory.test_memory import ask
from tests.conftest import Gateway, running_gateway, servers_ready, stdio_entry, wait_for_health
from tests.support.fake_upstream import Call, FakeUpstream, Turn

STAGE_SECONDS = "600"
FORGETFUL_STAGE_SECONDS = "601"  # what tells its process from the others


def tasking(stage_seconds: str = STAGE_SECONDS, **env: str) -> dict[str, Any]:
    return stdio_entry("tasking.py", stage_seconds) | {"env": env}


@pytest.fixture(scope="module")
def gateway(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    # A task wait of 0: the request asks about its task once, as its wait ends; any later tasks/get is the page's.
    servers = {"together": tasking(TASKING_GETS_TOGETHER="2", TASKING_POLL_MS="0"),
               "patient": tasking(TASKING_POLL_MS="3600000", TASKING_TELL_GETS="1"),
               "forgetful": tasking(FORGETFUL_STAGE_SECONDS, TASKING_POLL_MS="0")}
    with running_gateway(tmp_path_factory.mktemp("tasks-page"), servers, ready=tuple(servers),
                         upstream_url=f"{upstream.url}/v1", task_wait=0) as gateway:
        yield gateway


@pytest.fixture(scope="module")
def dropping_gateway(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """A server whose process exits as it is asked about a task a second time (the first ask ends the request's
    wait): the connection drops, the task is not known to be gone."""
    servers = {"dropping": tasking(TASKING_EXIT_ON_GET="2", TASKING_POLL_MS="0")}
    with running_gateway(tmp_path_factory.mktemp("tasks-dropping"), servers, ready=tuple(servers),
                         upstream_url=f"{upstream.url}/v1", task_wait=0) as gateway:
        yield gateway


@pytest.fixture(scope="module")
def chat_gateway(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """Its own server: the page's reads would ask about its tasks too."""
    servers = {"paired": tasking(TASKING_GETS_TOGETHER="2", TASKING_POLL_MS="0")}
    with running_gateway(tmp_path_factory.mktemp("tasks-chat"), servers, ready=tuple(servers),
                         upstream_url=f"{upstream.url}/v1", task_wait=0) as gateway:
        yield gateway


def start(gateway: Gateway, upstream: FakeUpstream, server: str, topic: str) -> str:
    """A chat whose one turn started `server`'s research task; the task's id."""
    upstream.script(Turn(calls=[Call(f"{server}__research", {"topic": topic})]), Turn(content="It is running."))
    assert ask(gateway.client(), [{"role": "user", "content": f"Research {topic}."}], stream=False) \
        == "It is running."
    [mark] = TaskMark.found_in(upstream.chat_requests()[-1]["messages"][-1]["content"])
    return mark.task_id


def _cmdline(process: psutil.Process) -> list[str]:
    """Its command line; none for one that ended meanwhile (another test's server exiting)."""
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def listed(gateway: Gateway, task_ids: list[str]) -> list[dict[str, Any]]:
    response = httpx.get(f"{gateway.url}/ui/tasks", timeout=30)
    response.raise_for_status()
    by_id = {entry["task_id"]: entry for entry in response.json()["data"]}
    return [by_id[task_id] for task_id in task_ids]


def test_the_running_tasks_are_asked_about_at_once(gateway: Gateway, upstream: FakeUpstream) -> None:
    # The server answers a tasks/get only once two are asked at once (or after 5 s, past the gateway's 2 s a task):
    # asked one after the other, the first would be given up on and listed as it was.
    tasks = [start(gateway, upstream, "together", topic) for topic in ("tides", "dunes")]
    entries = listed(gateway, tasks)
    assert [e["status"] for e in entries] == ["working", "working"]
    assert all(e["message"].endswith("(asked 2 times, together)") for e in entries), entries


def test_a_task_is_asked_about_no_more_often_than_its_server_asks(gateway: Gateway, upstream: FakeUpstream) -> None:
    [task] = [start(gateway, upstream, "patient", "glaciers")]
    # An hour's pollInterval: the page shows what the server said as the request's wait ended, without asking again.
    [first] = listed(gateway, [task])
    assert first["status"] == "working" and first["message"].endswith("(asked 1 times)"), first
    assert listed(gateway, [task]) == [first] and listed(gateway, [task]) == [first]


def test_a_chats_next_turn_asks_about_its_running_tasks_at_once(chat_gateway: Gateway, upstream: FakeUpstream
                                                                 ) -> None:
    history: list[dict[str, Any]] = [{"role": "user", "content": "Research tides and dunes."}]
    both = [Call("paired__research", {"topic": topic}) for topic in ("tides", "dunes")]
    upstream.script(Turn(calls=both), Turn(content="Both are running."))
    history.append({"role": "assistant", "content": ask(chat_gateway.client(), history, stream=False)})
    history.append({"role": "user", "content": "Are they done?"})
    upstream.script(Turn(content="Still running."))
    assert ask(chat_gateway.client(), history, stream=False) == "Still running."
    told = [m["content"] for m in upstream.chat_requests()[-1]["messages"] if m["role"] == "tool"][-2:]
    assert all("still running" in result and "(asked 2 times, together)" in result for result in told), told


def test_a_task_its_server_no_longer_knows_is_listed_failed(gateway: Gateway, upstream: FakeUpstream) -> None:
    task = start(gateway, upstream, "forgetful", "reefs")
    assert [e["status"] for e in listed(gateway, [task])] == ["working"]
    [server] = [p for p in psutil.Process().children(recursive=True)
                if _cmdline(p)[-2:] == [stdio_entry("tasking.py")["args"][0], FORGETFUL_STAGE_SECONDS]]
    server.kill()  # its tasks die with it; the gateway starts it again
    wait_for_health(gateway.url, lambda body: servers_ready("forgetful")(body)
                    and body["servers"]["forgetful"].get("restarts", 0) >= 1)
    [entry] = listed(gateway, [task])
    assert (entry["status"], entry["ended"], entry["message"]) == ("failed", True, TASK_UNKNOWN)


def test_a_connection_that_drops_as_the_page_asks_leaves_the_task_as_it_was(dropping_gateway: Gateway,
                                                                            upstream: FakeUpstream) -> None:
    task = start(dropping_gateway, upstream, "dropping", "storms")
    [entry] = listed(dropping_gateway, [task])  # the server's process exits as it is asked
    assert (entry["status"], entry["ended"]) == ("working", False), entry


def test_a_connection_that_drops_as_a_chat_asks_is_not_the_tasks_end(dropping_gateway: Gateway,
                                                                      upstream: FakeUpstream) -> None:
    history: list[dict[str, Any]] = [{"role": "user", "content": "Research winds."}]
    upstream.script(Turn(calls=[Call("dropping__research", {"topic": "winds"})]), Turn(content="It is running."))
    history.append({"role": "assistant", "content": ask(dropping_gateway.client(), history, stream=False)})
    history.append({"role": "user", "content": "Is it done?"})
    upstream.script(Turn(content="The server dropped."))
    assert ask(dropping_gateway.client(), history, stream=False) == "The server dropped."
    [told] = [m["content"] for m in upstream.chat_requests()[-1]["messages"] if m["role"] == "tool"][-1:]
    # Unavailable for now (the connection closed, or the server is restarting), not failed: asked again next turn.
    assert '"error":"server_unavailable"' in told and ": failed]" not in told, told
