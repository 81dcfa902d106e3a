"""S4 of the 2026-11-27 audit: held 2025-era calls were unbounded. Each question a 2025-era server asks in the
middle of a call keeps the call open, in the gateway and in the server, for 10 minutes (app/mcp/held_calls.py);
one key opened 4,000 of them one after another (+189 MB in the gateway, +136 MB in the server).

The attacker, a key of the keys file, asks for one booking after another and never answers. Now at most
HELD_PER_KEY calls wait for one key and HELD_PER_SERVER on one server: past either, the server's next question
is declined and the model (and through it the person) reads why, while every call already waiting, and other
keys' questions, go on as before. Real HTTP with the openai SDK, a real stdio server (asks.py, `mode: legacy`)."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import app.mcp.held_calls as held_calls
from app.mcp.held_calls import HELD_PER_KEY
from tests.chat.memory.test_memory import ask
from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import Call, FakeUpstream, Turn, readable

ALICE, BOB, CAROL = "sk-alice-held-1", "sk-bob-held-2", "sk-carol-held-3"
SERVERS = {"legacy": stdio_entry("asks.py") | {"mode": "legacy"}}
QUESTION = "for how many people, and when?"


@pytest.fixture
def gateway(upstream: FakeUpstream, tmp_path: Path) -> Iterator[Gateway]:
    """A gateway of its own for each test: a held call outlives its request (10 minutes)."""
    keys = {key: {"servers": ["legacy"], "name": name} for key, name in ((ALICE, "alice"), (BOB, "bob"), (CAROL, "c"))}
    (tmp_path / "keys.json").write_text(json.dumps({"keys": keys}))
    with running_gateway(tmp_path, SERVERS, ready=["legacy"], key=ALICE, upstream_url=f"{upstream.url}/v1",
                         tool_trace="off", keys_file=tmp_path / "keys.json") as gateway:
        yield gateway


def relayed(body: dict[str, Any]) -> Turn:
    """A model that tells the person what the tool said."""
    return Turn(content=readable(body["messages"][-1]["content"]))


def book(gateway: Gateway, upstream: FakeUpstream, key: str, restaurant: str, *, stream: bool = False) -> str:
    """What the person reads after asking for a booking: the server's question, or the model's answer."""
    upstream.script(Turn(calls=[Call("legacy__book_table", {"restaurant": restaurant})]), relayed)
    return ask(gateway.client(key), [{"role": "user", "content": f"Book {restaurant}."}], stream=stream)


def test_one_key_holds_its_share_and_its_next_questions_are_declined_saying_why(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    answers = [book(gateway, upstream, ALICE, f"R{number}", stream=number % 2 == 1) for number in range(25)]
    asked = [answer for answer in answers if QUESTION in answer]
    assert len(asked) == HELD_PER_KEY and all(QUESTION in answer for answer in answers[:HELD_PER_KEY])
    for declined in answers[HELD_PER_KEY:]:
        assert declined.startswith(f"Error[questions_waiting]: {HELD_PER_KEY} questions from MCP server 'legacy' "
                                   "already wait for this person's answer"), declined
        assert "answer or cancel those first" in declined and "call the tool again" in declined
    assert QUESTION in book(gateway, upstream, BOB, "Bobs")  # another key's question is held as before
    # The first call still waits, whole: its answer books the table.
    history: list[dict[str, Any]] = [{"role": "user", "content": "Book R0."},
                                     {"role": "assistant", "content": asked[0]},
                                     {"role": "user", "content": "party_size: 3\ntime: 21:15"}]
    upstream.script(relayed)
    assert ask(gateway.client(ALICE), history, stream=False) == "booked R0 for 3 at 21:15"
    assert QUESTION in book(gateway, upstream, ALICE, "R25")  # and its answer made room for one more


def test_one_server_holds_its_share_of_every_keys_questions(
    gateway: Gateway, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The gateway runs in this process: a smaller bound than the shipped 100 takes fewer requests to reach.
    monkeypatch.setattr(held_calls, "HELD_PER_SERVER", HELD_PER_KEY + 2)
    assert all(QUESTION in book(gateway, upstream, ALICE, f"A{number}") for number in range(HELD_PER_KEY))
    assert all(QUESTION in book(gateway, upstream, BOB, f"B{number}") for number in range(2))
    declined = book(gateway, upstream, CAROL, "C0")
    assert declined.startswith(f"Error[questions_waiting]: {HELD_PER_KEY + 2} questions from MCP server 'legacy' "
                               "already wait for people's answers, the most it may hold at once"), declined
