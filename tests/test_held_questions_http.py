"""A 2025-era server's question in the middle of a call, as a person sees it: tests/support/mcp_servers/asks.py on a
`"mode": "legacy"` connection pushes `elicitation/create` from `book_table`; the gateway holds the call, ends the
answer with the question, and the next message's answer reaches the waiting call, which books the table. The
openai SDK, whole and streamed; and two gateways on one Redis, where the answer reaching the other replica
finds no call waiting there and the model is told to call the tool again."""

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.chat.memory.test_memory import after_system, ask
from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.support.replica_services import RedisServer

SERVERS = {"asks": stdio_entry("asks.py") | {"mode": "legacy"}}
BOOK = Turn(content="Booking.", calls=[Call("asks__book_table", {"restaurant": "Luigi"})])


@pytest.fixture(scope="module")
def legacy_asking(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with running_gateway(tmp_path_factory.mktemp("legacy-asks"), SERVERS, ready=["asks"],
                         upstream_url=f"{upstream.url}/v1", tool_trace="off") as gateway:
        yield gateway


def tool_result(upstream: FakeUpstream) -> Any:
    """What the book_table call gave the model in the last request."""
    [result] = [m["content"] for m in upstream.chat_requests()[-1]["messages"] if m["role"] == "tool"]
    return json.loads(result)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_question_asked_mid_call_is_answered_in_the_next_message(
    legacy_asking: Gateway, upstream: FakeUpstream, stream: bool
) -> None:
    client = legacy_asking.client()
    upstream.script(BOOK)
    history: list[dict[str, Any]] = [{"role": "user", "content": f"Book Luigi, {stream}."}]
    question = ask(client, history, stream=stream)
    assert "for how many people, and when?" in question and "party_size" in question and "Question" in question
    history += [{"role": "assistant", "content": question}, {"role": "user", "content": "party_size: 3\ntime: 21:15"}]
    upstream.script(Turn(content="Booked for three."))
    assert ask(client, history, stream=stream) == "Booked for three."
    assert tool_result(upstream)["data"] == {"result": "booked Luigi for 3 at 21:15"}
    seen = after_system(upstream.chat_requests()[0]["messages"])
    assert [m["role"] for m in seen] == ["user", "assistant", "tool"] and "party_size" not in json.dumps(seen)


def test_the_held_call_is_input_needed_on_the_status_page_as_the_docs_say(
    legacy_asking: Gateway, upstream: FakeUpstream
) -> None:
    """Issue 45's C9: the status page's `input_needed` covers a 2025-era held question too, and so must its docs."""
    upstream.script(BOOK)
    ask(legacy_asking.client(), [{"role": "user", "content": "Book Luigi, for the status page."}], stream=False)
    calls = httpx.get(f"{legacy_asking.url}/ui/calls", timeout=30).json()["data"]
    assert (calls[-1]["tool"], calls[-1]["outcome"]) == ("book_table", "input_needed")
    operations = (Path(__file__).parent.parent / "docs" / "operations.md").read_text()
    defined = " ".join(operations[operations.index("`input_needed`, not a failure"):].split())
    assert re.match(r"`input_needed`, not a failure: [^)]*2026-era[^)]*2025-era[^)]*\)", defined), defined[:300]


def test_a_wrong_value_is_asked_again_while_the_call_waits_then_decline_reaches_it(
    legacy_asking: Gateway, upstream: FakeUpstream
) -> None:
    client = legacy_asking.client()
    upstream.script(BOOK)
    history: list[dict[str, Any]] = [{"role": "user", "content": "Book Luigi, perhaps."}]
    history.append({"role": "assistant", "content": ask(client, history, stream=False)})
    history.append({"role": "user", "content": "party_size: many\ntime: 19:30"})
    upstream.script()
    again = ask(client, history, stream=False)
    assert "Party size" in again and "whole number" in again and upstream.chat_requests() == []
    history += [{"role": "assistant", "content": again}, {"role": "user", "content": "decline"}]
    upstream.script(Turn(content="No booking then."))
    ask(client, history, stream=True)
    assert tool_result(upstream)["data"] == {"result": "no booking at Luigi: the person chose decline"}


def test_the_answer_reaching_another_replica_is_told_to_call_again(
    redis_server: RedisServer, upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # The question waits inside the call, in the process that asked it: a replica cannot take it over.
    settings: dict[str, Any] = {"upstream_url": f"{upstream.url}/v1", "tool_trace": "off",
                                "state_url": redis_server.url}
    with (running_gateway(tmp_path_factory.mktemp("a"), SERVERS, ready=["asks"], **settings) as a,
          running_gateway(tmp_path_factory.mktemp("b"), SERVERS, ready=["asks"], **settings) as b):
        upstream.script(BOOK)
        history: list[dict[str, Any]] = [{"role": "user", "content": "Book Luigi on another replica."}]
        history.append({"role": "assistant", "content": ask(a.client(), history, stream=False)})
        history.append({"role": "user", "content": "party_size: 2\ntime: 20:00"})
        upstream.script(Turn(content="It did not go through; shall I ask again?"))
        assert ask(b.client(), history, stream=True) == "It did not go through; shall I ask again?"
        told = tool_result(upstream)
    assert told["status"] == "error" and "in the gateway process that asked it" in told["data"]["message"]
    assert "Call the tool again" in told["data"]["message"]


def test_a_second_question_after_the_first_answer_is_asked_and_answered_in_turn(
    legacy_asking: Gateway, upstream: FakeUpstream
) -> None:
    client = legacy_asking.client()
    upstream.script(Turn(calls=[Call("asks__book_late", {"restaurant": "Luigi"})]))
    history: list[dict[str, Any]] = [{"role": "user", "content": "Book Luigi, late if need be."}]
    history.append({"role": "assistant", "content": ask(client, history, stream=True)})
    history.append({"role": "user", "content": "party_size: 5\ntime: 19:30"})
    upstream.script()
    second = ask(client, history, stream=False)
    assert "Luigi is full at 19:30; 21:00 instead?" in second and upstream.chat_requests() == []
    history += [{"role": "assistant", "content": second}, {"role": "user", "content": "yes"}]
    upstream.script(Turn(content="Booked at nine."))
    assert ask(client, history, stream=True) == "Booked at nine."
    assert tool_result(upstream)["data"] == {"result": "booked Luigi for 5 at 21:00"}
    seen = after_system(upstream.chat_requests()[0]["messages"])
    assert [m["role"] for m in seen] == ["user", "assistant", "tool"] and "21:00 instead" not in json.dumps(seen)


def test_the_details_trace_shows_the_asking_call_as_waiting_only(
    legacy_asking: Gateway, upstream: FakeUpstream
) -> None:
    # Not also as a finished call with a placeholder result: the call has not finished, it waits for the person.
    upstream.script(BOOK)
    question = ask(legacy_asking.client(default_headers={"X-Toolbridge-Trace": "details"}),
                   [{"role": "user", "content": "Book Luigi, traced."}], stream=True)
    assert question.count("<details ") == 1 and 'data-toolbridge="waiting"' in question
    assert "asks__book_table: waiting for your answer" in question
    assert "input_required" not in question and "for how many people, and when?" in question
