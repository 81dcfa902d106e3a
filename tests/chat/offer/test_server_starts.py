"""A chat in the first seconds after start-up (issue 45's C7): it waits for the MCP servers still starting, up to
TOOLBRIDGE_MCP_START_WAIT, so that it has their tools; those still not ready then are named in the answer's trace,
in every trace mode and through every door. Over real HTTP with a slow-starting stdio server
(tests/support/mcp_servers/gated_start.py: it starts once its gate file exists) and one that fails to start; the
wait's rules (app/chat/server_starts.py) with states in a table."""

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from app.chat.answer.trace import strip_trace
from app.chat.offer.missing_servers import NotReady, await_starting
from app.chat.ports import ALL_TOOLS, ToolSelection
from tests.conftest import READY_TIMEOUT, Gateway, running_gateway, stdio_entry, wait_for_health
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn
from tests.test_door_parity import DOORS, each_door, user

STARTING = "MCP server 'gated' is still starting: its tools are missing from this answer."
FAILED = ("MCP server 'gated' failed to start (the gateway's operator can see why): its tools are missing from this "
          "answer.")


def offered(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools") or []]


def chat_while_starting(gateway: Gateway, gate: Path, logs: list[dict[str, Any]]) -> Any:
    """A chat sent while the gated server starts; its gate opened only once the chat waits for it, so that without
    the wait the chat would have been answered before the server's start was over."""
    answers: list[Any] = []
    chat = threading.Thread(target=lambda: answers.append(gateway.client().chat.completions.create(
        model=MODEL, messages=[user("hi")])))
    chat.start()
    wait_for_health(gateway.url, lambda _: any(e["event"] == "chat_waits_for_mcp_servers" for e in logs))
    gate.touch()
    chat.join(READY_TIMEOUT)
    [answer] = answers
    return answer.choices[0].message


def test_a_chat_sent_while_a_server_starts_waits_for_its_tools(tmp_path: Path, upstream: FakeUpstream) -> None:
    gate = tmp_path / "gate"
    servers = {"basic": stdio_entry("basic.py"), "gated": stdio_entry("gated_start.py", str(gate))}
    with running_gateway(tmp_path, servers, ready=("basic",), upstream_url=f"{upstream.url}/v1",
                         mcp_start_wait=READY_TIMEOUT) as gateway, capture_logs() as logs:
        upstream.script(Turn(content="Both servers' tools."))
        message = chat_while_starting(gateway, gate, logs)
    assert message.content == "Both servers' tools."
    assert (message.model_extra or {}).get("reasoning_content") is None  # nothing is missing
    assert "gated__ping" in offered(upstream.chat_requests()[0])
    [waited] = [e for e in logs if e["event"] == "chat_waits_for_mcp_servers"]
    assert waited["servers"] == ["gated"]


def test_a_server_that_fails_while_the_chat_waits_is_named_failed(upstream: FakeUpstream, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    servers = {"basic": stdio_entry("basic.py"), "gated": stdio_entry("gated_start.py", str(gate), "fail")}
    with running_gateway(tmp_path, servers, ready=("basic",), upstream_url=f"{upstream.url}/v1",
                         mcp_start_wait=READY_TIMEOUT) as gateway, capture_logs() as logs:
        upstream.script(Turn(content="ok"))
        message = chat_while_starting(gateway, gate, logs)
        # Its state alone: its error, with its stderr, stays the operator's.
        assert (message.model_extra or {}).get("reasoning_content") == f"{FAILED}\n"
        upstream.script(Turn(content="ok"))
        later = gateway.client().chat.completions.create(model=MODEL, messages=[user("hi again")])
        assert (later.choices[0].message.model_extra or {}).get("reasoning_content") is None  # past its first start


@pytest.fixture(scope="module")
def slow(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """A gateway whose `gated` server never finishes starting; chats wait for it briefly."""
    tmp = tmp_path_factory.mktemp("slow")
    servers = {"basic": stdio_entry("basic.py"), "gated": stdio_entry("gated_start.py", str(tmp / "never"))}
    with running_gateway(tmp, servers, ready=("basic",), upstream_url=f"{upstream.url}/v1",
                         mcp_start_wait=0.5) as gateway:
        yield gateway


@pytest.mark.parametrize(("mode", "content", "reasoning"), [
    ("reasoning", "ok", f"{STARTING}\n"),
    ("off", "ok", f"{STARTING}\n"),  # the person still gets word, where it is least in the way
    ("markdown", f"\n> 🔧 {STARTING}\n\nok", ""),
    ("details", f"\n> 🔧 {STARTING}\n\nok", ""),
])
def test_servers_not_ready_are_named_in_every_trace_mode(
    slow: Gateway, upstream: FakeUpstream, mode: str, content: str, reasoning: str
) -> None:
    upstream.script(Turn(content="ok"))
    answer = slow.client(default_headers={"X-Toolbridge-Trace": mode}).chat.completions.create(
        model=MODEL, messages=[user(f"hi in {mode}")])
    message = answer.choices[0].message
    assert message.content == content
    assert ((message.model_extra or {}).get("reasoning_content") or "") == reasoning
    assert "gated__ping" not in offered(upstream.chat_requests()[0])


@each_door(["chat", "responses", "messages", "ollama"])
def test_every_door_names_them(slow: Gateway, upstream: FakeUpstream, door: str, stream: bool) -> None:
    upstream.script(Turn(content="ok"))
    said = DOORS[door](slow, [user(f"hi through {door}")], stream, {}, MODEL, "")
    assert said.text == "ok" and said.reasoning.startswith(f"{STARTING}\n")


def test_the_note_leaves_the_history_as_the_trace_does(slow: Gateway, upstream: FakeUpstream) -> None:
    client = slow.client(default_headers={"X-Toolbridge-Trace": "markdown"})
    ask = [user("Echo hi while gated starts.")]
    upstream.script(Turn(calls=[Call("basic__echo", {"text": "hi"})]), Turn(content="It said hi."))
    first = client.chat.completions.create(model=MODEL, messages=ask).choices[0].message.content or ""
    assert first.startswith(f"\n> 🔧 {STARTING}\n") and strip_trace(first) == "It said hi."
    upstream.script(Turn(content="It said hi, earlier."))
    client.chat.completions.create(model=MODEL, messages=[*ask, {"role": "assistant", "content": first},
                                                          user("What did it say?")])
    restored = [m["role"] for m in upstream.chat_requests()[0]["messages"] if m["role"] != "system"]
    assert restored == ["user", "assistant", "tool", "assistant", "user"]  # memory found the turn


# The wait's rules, with servers' states in a table.


class States:
    """Servers whose states change as listed, one step at each `next_change`."""

    def __init__(self, *steps: dict[str, str], ages: dict[str, float] | None = None) -> None:
        self.steps = list(steps)
        self.ages = ages or {}  # how long each has been starting; 0 unless given
        self.looked = 0  # how often the wait asked for the next change

    def server_states(self) -> dict[str, str]:
        return self.steps[0]

    def starting_for(self) -> dict[str, float]:
        return {name: self.ages.get(name, 0.0) for name, state in self.steps[0].items() if state == "starting"}

    async def next_change(self) -> None:
        self.looked += 1
        if len(self.steps) > 1:
            self.steps.pop(0)
        else:
            await anyio.sleep_forever()  # nothing changes any more: the wait's bound ends it


def waited(states: States, selection: ToolSelection = ALL_TOOLS, seconds: float = 5.0) -> list[NotReady]:
    return anyio.run(await_starting, states, selection, seconds)


def test_the_wait_ends_when_the_servers_are_past_starting() -> None:
    states = States({"a": "starting", "b": "starting"}, {"a": "ready", "b": "starting"},
                    {"a": "ready", "b": "failed"})
    assert waited(states) == [NotReady("b", "failed to start (the gateway's operator can see why)")]
    assert waited(States({"a": "starting"}, {"a": "ready"})) == []


def test_the_bound_ends_the_wait_and_the_servers_still_starting_are_named() -> None:
    assert waited(States({"a": "starting"}), seconds=0) == [NotReady("a", "is still starting")]


def test_the_bound_counts_from_the_servers_start_not_the_chats() -> None:
    """A server that takes a minute to start delays the chats of its first `seconds`, not every chat of that
    minute: one starting for the whole bound already is named at once, without a wait."""
    late = States({"a": "starting"}, {"a": "ready"}, ages={"a": 10.0})
    assert waited(late, seconds=10.0) == [NotReady("a", "is still starting")]
    assert late.looked == 0
    fresh = States({"a": "starting", "b": "starting"}, {"a": "ready", "b": "ready"}, ages={"a": 10.0, "b": 2.0})
    assert waited(fresh, seconds=10.0) == []  # b's start is young: the chat waits for it, and a came too
    assert fresh.looked == 1


@pytest.mark.parametrize(("selection", "awaited"), [
    (ToolSelection(), {"a", "b"}),
    (ToolSelection((frozenset({"a"}),)), {"a"}),  # servers named: the others are not waited for
    (ToolSelection((frozenset({"a", "b__tool"}),)), {"a", "b"}),  # a tool named: it may be b's, not known yet
    (ToolSelection((), frozenset({"b"})), {"a"}),
])
def test_only_servers_whose_tools_the_request_may_offer_are_waited_for(
    selection: ToolSelection, awaited: set[str]
) -> None:
    states = States({"a": "starting", "b": "starting", "c": "ready"})
    assert {m.server for m in waited(states, selection, seconds=0)} == awaited
