"""A 2026-era server's questions as a person sees them: tests/support/mcp_servers/asks.py over stdio answers
`book_table` with `input_required`; the gateway asks in the chat, the next message answers, the call is sent
again with the answer and the server's sealed state. The openai SDK, whole and streamed, and two gateways on
one Redis: the answer reaching the other replica (its own process of the server) still books the table."""

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.chat.memory.test_memory import after_system, ask
from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.support.replica_services import RedisServer

SERVERS = {"asks": stdio_entry("asks.py")}
BOOK = Turn(content="Booking.", calls=[Call("asks__book_table", {"restaurant": "Luigi"})])


@pytest.fixture(scope="module")
def asking(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with running_gateway(tmp_path_factory.mktemp("asks"), SERVERS, ready=["asks"],
                         upstream_url=f"{upstream.url}/v1", tool_trace="off") as gateway:
        yield gateway


def booked(upstream: FakeUpstream) -> Any:
    """The book_table result the model was given in the last request."""
    [result] = [m["content"] for m in upstream.chat_requests()[-1]["messages"] if m["role"] == "tool"]
    return json.loads(result)["data"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_servers_question_is_asked_in_the_chat_and_the_answer_books_the_table(
    asking: Gateway, upstream: FakeUpstream, stream: bool
) -> None:
    client = asking.client()
    upstream.script(BOOK)
    history: list[dict[str, Any]] = [{"role": "user", "content": f"Book Luigi ({stream})."}]
    question = ask(client, history, stream=stream)
    assert "for how many people, and when?" in question and "party_size" in question
    assert len(upstream.chat_requests()) == 1
    history += [{"role": "assistant", "content": question}, {"role": "user", "content": "party_size: 4\ntime: 19:30"}]
    upstream.script(Turn(content="Booked for four."))
    assert ask(client, history, stream=stream) == "Booked for four."
    assert booked(upstream) == {"result": "booked Luigi for 4 at 19:30"}
    seen = after_system(upstream.chat_requests()[0]["messages"])
    assert [m["role"] for m in seen] == ["user", "assistant", "tool"] and "party_size" not in json.dumps(seen)


def test_a_wrong_value_is_asked_about_again_and_decline_reaches_the_server(
    asking: Gateway, upstream: FakeUpstream
) -> None:
    client = asking.client()
    upstream.script(BOOK)
    history: list[dict[str, Any]] = [{"role": "user", "content": "Book Luigi, maybe."}]
    history.append({"role": "assistant", "content": ask(client, history, stream=False)})
    history.append({"role": "user", "content": "party_size: 50\ntime: 19:30"})
    upstream.script()
    again = ask(client, history, stream=False)
    assert "party_size" in again and "20" in again and upstream.chat_requests() == []
    history += [{"role": "assistant", "content": again}, {"role": "user", "content": "decline"}]
    upstream.script(Turn(content="No booking then."))
    ask(client, history, stream=False)
    assert booked(upstream) == {"result": "no booking at Luigi: the person chose decline"}


def test_the_answer_reaching_the_other_replica_books_the_table_there(
    redis_server: RedisServer, upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory
) -> None:
    settings: dict[str, Any] = {"upstream_url": f"{upstream.url}/v1", "tool_trace": "off",
                                "state_url": redis_server.url}
    with (running_gateway(tmp_path_factory.mktemp("a"), SERVERS, ready=["asks"], **settings) as a,
          running_gateway(tmp_path_factory.mktemp("b"), SERVERS, ready=["asks"], **settings) as b):
        upstream.script(BOOK)
        history: list[dict[str, Any]] = [{"role": "user", "content": "Book Luigi across replicas."}]
        history.append({"role": "assistant", "content": ask(a.client(), history, stream=False)})
        history.append({"role": "user", "content": "party_size: 2\ntime: 20:00"})
        upstream.script(Turn(content="Booked."))
        assert ask(b.client(), history, stream=True) == "Booked."
        assert booked(upstream) == {"result": "booked Luigi for 2 at 20:00"}
