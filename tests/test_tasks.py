"""Issue 49: tools a server runs as MCP tasks, on both wires, through the openai SDK whole and streamed:
server-everything's `simulate-research-query` (2025-11-25: the tool runs only as a task, four stages of a second) and
tests/support/mcp_servers/tasking.py (2026-07-28, the tasks extension written with the mcp SDK: the server makes
the call a task, three stages of a second).

A task that ends within TOOLBRIDGE_TASK_WAIT is an ordinary call (its stages shown as progress); one that does not
leaves the request: the model is told it started, the person chats on, and each later turn of the chat asks the
server about it until its result reaches the model, once.
"""

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.chat.ports import TaskMark
from tests.chat.memory.test_memory import ask
from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.support.replica_services import RedisServer
from tests.support.servers import ServerThread
from tests.test_reference_servers import EVERYTHING, INSTALLED

RESEARCH = "everything__simulate-research-query"
OPTIONAL_TASKS = Path(__file__).parent / "npm" / "optional_tasks_server.mjs"
# Each server's research tool, and how its report begins.
SERVERS = {"everything": (RESEARCH, "Research Report: "), "tasking": ("tasking__research", "Research report: ")}
TASK_SECONDS = 4  # server-everything's four stages
DEADLINE = 60.0
DECLARED = {"Content-Type": "application/json"}  # as every change the status page makes
PERSON_PAUSE = 1.0  # seconds between the person's messages
PAGE_POLL = 0.3  # seconds between two reads of the status page's list


@pytest.fixture(scope="module")
def tasking_gateway(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    assert INSTALLED, "CI must install the reference servers: npm ci --prefix tests/npm"
    servers = {"everything": {"command": str(EVERYTHING)}, "tasking": stdio_entry("tasking.py")}
    with running_gateway(tmp_path_factory.mktemp("tasks"), servers, ready=tuple(servers),
                         upstream_url=f"{upstream.url}/v1", task_wait=0.5) as gateway:
        yield gateway


def tool_results(upstream: FakeUpstream, request: int = -1) -> list[str]:
    return [m["content"] for m in upstream.chat_requests()[request]["messages"] if m["role"] == "tool"]


def chat_on(client: Any, upstream: FakeUpstream, history: list[dict[str, Any]], until: str, *,
            stream: bool = False) -> str:
    """The person chats on ("Is it done?" at a person's pace; first whatever ends `history` when it is theirs) until
    the last tool result the model saw holds `until`, within DEADLINE; that result. Each one on the way says how the
    task does."""
    deadline = time.monotonic() + DEADLINE
    while True:
        if history[-1]["role"] != "user":
            time.sleep(PERSON_PAUSE)  # a person's pace; what ends the loop is the result itself, within DEADLINE
            history.append({"role": "user", "content": "Is it done?"})
        upstream.script(Turn(content="Noted."))
        history.append({"role": "assistant", "content": ask(client, history, stream=stream)})
        [outcome] = tool_results(upstream)[-1:]
        if until in outcome:
            return outcome
        assert "still running" in outcome or "has ended" in outcome, outcome
        assert time.monotonic() < deadline, outcome


def until_asked(client: Any, upstream: FakeUpstream, history: list[dict[str, Any]], question: str, *,
                stream: bool) -> str:
    """The first turn (as the test scripted it), then "Is it done?" until the response is the task's question."""
    said, deadline = ask(client, history, stream=stream), time.monotonic() + DEADLINE
    while question not in said:
        assert said in ("It is running.", "Noted."), said
        assert time.monotonic() < deadline, said
        history += [{"role": "assistant", "content": said}, {"role": "user", "content": "Is it done?"}]
        time.sleep(PERSON_PAUSE)
        upstream.script(Turn(content="Noted."))
        said = ask(client, history, stream=stream)
    return said


def test_a_tool_that_runs_only_as_a_task_is_offered(tasking_gateway: Gateway) -> None:
    tools = httpx.get(f"{tasking_gateway.url}/tools", timeout=30).json()["data"]
    assert RESEARCH in {tool["function"]["name"] for tool in tools}


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_task_longer_than_the_wait_reaches_the_model_in_a_later_turn(
    tasking_gateway: Gateway, upstream: FakeUpstream, stream: bool, server: str
) -> None:
    tool, report = SERVERS[server]
    client = tasking_gateway.client()
    history: list[dict[str, Any]] = [{"role": "user", "content": f"Research the tides ({stream}, {server})."}]
    upstream.script(Turn(calls=[Call(tool, {"topic": f"tides {stream}"})]), Turn(content="It is running."))
    started = time.monotonic()
    history.append({"role": "assistant", "content": ask(client, history, stream=stream)})
    assert history[-1]["content"] == "It is running."
    assert time.monotonic() - started < TASK_SECONDS  # the request did not wait for the task
    [note] = tool_results(upstream)
    assert f"started a background task on the MCP server '{server}'" in note and ": working]" in note

    # The person chats on; each turn the model hears how the task is doing, until its result, once.
    outcome = chat_on(client, upstream, history, report, stream=stream)
    assert f"{report}tides {stream}" in outcome and ": completed]" in outcome
    messages = upstream.chat_requests()[-1]["messages"]
    assert [m["role"] for m in messages[-3:]] == ["user", "assistant", "tool"]  # after the person's message
    assert messages[-2]["tool_calls"][0]["function"]["name"] == tool

    upstream.script(Turn(content="Here is what it found."))
    history += [{"role": "user", "content": "What did it find?"}]
    assert ask(client, history, stream=stream) == "Here is what it found."
    sent = upstream.chat_requests()[-1]["messages"]
    assert sent[-1] == history[-1]  # not asked about again: its result is in the history memory gives back
    assert any(f"{report}tides {stream}" in str(m.get("content")) for m in sent if m["role"] == "tool")
    assert not any("still running" in str(m.get("content")) for m in sent)  # memory keeps a task's end, not each turn


def test_a_task_that_ends_within_the_wait_is_an_ordinary_call(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    with running_gateway(tmp_path, {"everything": {"command": str(EVERYTHING)}}, ready=("everything",),
                         upstream_url=f"{upstream.url}/v1", task_wait=30) as gateway:
        upstream.script(Turn(calls=[Call(RESEARCH, {"topic": "coral"})]), Turn(content="Done."))
        chunks = list(gateway.client().chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Research coral."}], stream=True))
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    reasoning = "".join(getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks if c.choices)
    [result] = tool_results(upstream)
    assert "Research Report: coral" in result and "background task" not in result
    assert content == "Done." and "Synthesizing findings" in reasoning  # its stages, as progress in the trace


def started(gateway: Gateway, upstream: FakeUpstream, topic: str, server: str = "everything"
            ) -> list[dict[str, Any]]:
    """A chat whose first turn started a research task that runs on; its history as the client keeps it."""
    history: list[dict[str, Any]] = [{"role": "user", "content": f"Research {topic} on {server}."}]
    upstream.script(Turn(calls=[Call(SERVERS[server][0], {"topic": topic})]), Turn(content="It is running."))
    history.append({"role": "assistant", "content": ask(gateway.client(), history, stream=False)})
    return history


def listed(gateway: Gateway) -> list[dict[str, Any]]:
    return httpx.get(f"{gateway.url}/ui/tasks", timeout=30).json()["data"]


def test_the_status_page_lists_a_task_as_its_server_last_described_it(
    tasking_gateway: Gateway, upstream: FakeUpstream
) -> None:
    started(tasking_gateway, upstream, "whales")
    [note] = tool_results(upstream)
    [mark] = TaskMark.found_in(note)
    [entry] = [t for t in listed(tasking_gateway) if t["task_id"] == mark.task_id]
    assert entry["tool"] == "simulate-research-query" and entry["server"] == "everything"
    assert entry["status"] == "working" and not entry["ended"] and entry["message"].endswith("...")
    page = httpx.get(f"{tasking_gateway.url}/", timeout=30).text
    assert 'id="tasks-section"' in page
    # Without a word in the chat, the list asks the server about what runs: its stages, then its end.
    said, deadline = [entry["message"]], time.monotonic() + DEADLINE
    while entry["status"] == "working":
        assert time.monotonic() < deadline, said
        time.sleep(PAGE_POLL)
        [entry] = [t for t in listed(tasking_gateway) if t["task_id"] == mark.task_id]
        said += [entry["message"]] if entry["message"] != said[-1] else []
    assert entry["status"] == "completed" and len(said) >= 2, said


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("how", ["in the chat", "on the status page"])
def test_a_running_task_can_be_cancelled(tasking_gateway: Gateway, upstream: FakeUpstream, how: str, server: str
                                         ) -> None:
    history = started(tasking_gateway, upstream, f"comets {how}", server)
    [mark] = TaskMark.found_in(tool_results(upstream)[0])
    if how == "on the status page":
        url = f"{tasking_gateway.url}/ui/tasks/{server}/{mark.task_id}/cancel"
        cancelled = httpx.post(url, headers=DECLARED, timeout=30)
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        history.append({"role": "user", "content": "Is it done?"})
    else:
        history.append({"role": "user", "content": "Cancel it."})
    upstream.script(Turn(content="It was cancelled."))
    assert ask(tasking_gateway.client(), history, stream=False) == "It was cancelled."
    [outcome] = tool_results(upstream)[-1:]
    assert "was cancelled" in outcome and ": cancelled]" in outcome
    [entry] = [t for t in listed(tasking_gateway) if t["task_id"] == mark.task_id]
    assert entry["status"] == "cancelled" and entry["ended"]
    history += [{"role": "assistant", "content": "It was cancelled."}, {"role": "user", "content": "Thanks."}]
    upstream.script(Turn(content="You're welcome."))
    ask(tasking_gateway.client(), history, stream=False)
    assert upstream.chat_requests()[-1]["messages"][-1] == history[-1]  # not asked about again


def test_a_task_not_in_the_callers_list_is_not_cancelled(tasking_gateway: Gateway) -> None:
    refused = httpx.post(f"{tasking_gateway.url}/ui/tasks/everything/no-such-task/cancel", headers=DECLARED,
                         timeout=30)
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "task_not_found"


def test_a_task_asked_about_on_a_replica_whose_server_never_ran_it_is_told_plainly(
    redis_server: RedisServer, upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # A stdio server runs in each replica: a task started through replica A lives in A's server. The chat's memory is
    # shared (Redis), so replica B finds the task and asks its own server, which never ran it: the model is told so,
    # once, and not asked again.
    settings: dict[str, Any] = {"upstream_url": f"{upstream.url}/v1", "state_url": redis_server.url, "task_wait": 0.5}
    servers = {"everything": {"command": str(EVERYTHING)}}
    with (running_gateway(tmp_path_factory.mktemp("a"), servers, ready=["everything"], **settings) as a,
          running_gateway(tmp_path_factory.mktemp("b"), servers, ready=["everything"], **settings) as b):
        history = started(a, upstream, "glaciers")
        history.append({"role": "user", "content": "Is it done?"})
        upstream.script(Turn(content="It cannot be reached from here."))
        history.append({"role": "assistant", "content": ask(b.client(), history, stream=True)})
        [outcome] = tool_results(upstream)[-1:]
        assert "no longer knows the background task" in outcome and ": failed]" in outcome
        history.append({"role": "user", "content": "Thanks."})
        upstream.script(Turn(content="Welcome."))
        ask(a.client(), history, stream=False)
        assert upstream.chat_requests()[-1]["messages"][-1] == history[-1]


def test_a_task_that_fails_tells_the_model_what_went_wrong(tasking_gateway: Gateway, upstream: FakeUpstream) -> None:
    history = started(tasking_gateway, upstream, "fail", "tasking")
    outcome = chat_on(tasking_gateway.client(), upstream, history, "has ended")
    assert ": failed]" in outcome and "The archive is down." in outcome


def test_a_server_that_answers_at_once_is_not_made_to_wait(tasking_gateway: Gateway, upstream: FakeUpstream) -> None:
    # The 2026 server decides call by call: a call of another tool, or from a client without the extension, is
    # answered at once; here the gateway declares it, and the server makes `research` a task.
    [tool] = [t for t in httpx.get(f"{tasking_gateway.url}/tools", timeout=30).json()["data"]
              if t["function"]["name"] == "tasking__research"]
    assert "run as a task" in tool["function"]["description"]


def test_the_trace_shows_what_a_task_said_in_a_later_turn(tasking_gateway: Gateway, upstream: FakeUpstream) -> None:
    history = started(tasking_gateway, upstream, "trace", "tasking")
    history.append({"role": "user", "content": "Is it done?"})
    upstream.script(Turn(content="Not yet."))
    chunks = list(tasking_gateway.client().chat.completions.create(model="m", messages=history, stream=True))  # type: ignore[arg-type]
    reasoning = "".join(getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks if c.choices)
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == "Not yet." and "tasking__research" in reasoning



def test_a_task_on_a_shared_remote_server_reaches_the_chat_through_the_other_replica(
    redis_server: RedisServer, upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # One remote server (streamable HTTP) whose tasks belong to no session, two replicas sharing memory on Redis:
    # started through A, asked about and delivered through B.
    from tests.support.mcp_servers.tasking import server

    with ServerThread(server.streamable_http_app()) as remote:
        settings: dict[str, Any] = {"upstream_url": f"{upstream.url}/v1", "state_url": redis_server.url,
                                    "task_wait": 0.2}
        servers = {"tasking": {"url": f"{remote.url}/mcp"}}
        with (running_gateway(tmp_path_factory.mktemp("a"), servers, ready=["tasking"], **settings) as a,
              running_gateway(tmp_path_factory.mktemp("b"), servers, ready=["tasking"], **settings) as b):
            history = started(a, upstream, "fjords", "tasking")
            outcome = chat_on(b.client(), upstream, history, "has ended", stream=True)
            assert "Research report: fjords" in outcome and ": completed]" in outcome


@pytest.mark.parametrize("wait", [0.2, 10.0], ids=["asked in a later turn", "asked within the wait"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_tasks_question_is_asked_in_the_chat_and_its_answer_goes_to_the_task(
    upstream: FakeUpstream, tmp_path: Path, wait: float, stream: bool
) -> None:
    # tasking.py's research on "tides" asks which tides after its first stage (2026: input_required in tasks/get).
    with running_gateway(tmp_path, {"tasking": stdio_entry("tasking.py")}, ready=("tasking",),
                         upstream_url=f"{upstream.url}/v1", task_wait=wait) as gateway:
        client = gateway.client()
        history: list[dict[str, Any]] = [{"role": "user", "content": "Research the tides."}]
        upstream.script(Turn(calls=[Call("tasking__research", {"topic": "tides"})]), Turn(content="It is running."))
        said = until_asked(client, upstream, history, "Which tides do you mean?", stream=stream)
        assert "ocean" in said and "earth" in said  # the choices, as any question of a server's
        history += [{"role": "assistant", "content": said}, {"role": "user", "content": "kind: ocean"}]
        outcome = chat_on(client, upstream, history, "has ended", stream=stream)
        assert "Research report: ocean tides" in outcome


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_2025_tasks_question_comes_through_its_result_and_is_asked_in_the_chat(
    tasking_gateway: Gateway, upstream: FakeUpstream, stream: bool
) -> None:
    # server-everything's research with `ambiguous` asks which interpretation at its third stage; a 2025 task's
    # question comes only while tasks/result is open, which the gateway holds as a call whose question is asked.
    client = tasking_gateway.client()
    history: list[dict[str, Any]] = [{"role": "user", "content": f"Research ambiguous tides ({stream})."}]
    upstream.script(Turn(calls=[Call(RESEARCH, {"topic": "tides", "ambiguous": True})]), Turn(content="It is running."))
    said = until_asked(client, upstream, history, "multiple interpretations", stream=stream)
    assert "Historical perspective" in said  # the choices, as any question of a server's
    history += [{"role": "assistant", "content": said}, {"role": "user", "content": "Clarification: historical"}]
    upstream.script(Turn(content="Done."))
    assert ask(client, history, stream=stream) == "Done."
    [outcome] = tool_results(upstream)[-1:]
    assert "Research Report: tides (historical)" in outcome and ": completed]" in outcome


@pytest.mark.parametrize("seconds", [0.3, 3.0], ids=["within the wait", "past the wait"])
def test_a_tool_that_may_run_as_a_task_leaves_the_request_only_past_the_wait(
    upstream: FakeUpstream, tmp_path: Path, seconds: float
) -> None:
    # tests/npm/optional_tasks_server.mjs (the TypeScript SDK's 2025 tasks): `measure` has taskSupport "optional", so
    # the gateway asks for a task: a call that passes TOOLBRIDGE_TASK_WAIT goes on without the request.
    servers = {"gauge": {"command": "node", "args": [str(OPTIONAL_TASKS)]}}
    with running_gateway(tmp_path, servers, ready=("gauge",), upstream_url=f"{upstream.url}/v1",
                         task_wait=1.0) as gateway:
        history: list[dict[str, Any]] = [{"role": "user", "content": "Read the gauge."}]
        upstream.script(Turn(calls=[Call("gauge__measure", {"seconds": seconds})]), Turn(content="Noted."))
        history.append({"role": "assistant", "content": ask(gateway.client(), history, stream=False)})
        [result] = tool_results(upstream)
        if seconds < 1.0:
            assert "The gauge reads 3.2 m" in result and "background task" not in result
            return
        assert "started a background task on the MCP server 'gauge'" in result
        outcome = chat_on(gateway.client(), upstream, history, "has ended")
        assert "The gauge reads 3.2 m (measured over 3 s)" in outcome
