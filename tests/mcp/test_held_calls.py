"""A 2025-era server's question in the middle of a call, held for the person's answer (app/mcp/held_calls.py),
through a real McpPool over stdio: tests/support/mcp_servers/asks.py on a `mode="legacy"` connection pushes
`elicitation/create` from `book_table`. The call comes back as its question while it waits in the server; the
answer, sent as the same call again, reaches the server and the call ends with its result."""

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

import app.mcp.held_calls as held_calls
from app.access import CURRENT_SCOPE, KeyScope
from app.chat.ports import ToolAnswers
from app.mcp.held_calls import held_state
from app.mcp.pool import McpPool
from app.mcp.results import ToolOutcome
from tests.mcp.test_pool import SETTLE_TIMEOUT, config, options, stdio
from tests.support.fake_upstream import readable

pytestmark = pytest.mark.anyio
LUIGI = '{"restaurant": "Luigi"}'
FOUR_AT_SEVEN = {"action": "accept", "content": {"party_size": 4, "time": "19:00"}}


@asynccontextmanager
async def legacy_pool(**pool_options: Any) -> AsyncIterator[McpPool]:
    pool = McpPool(config(asks=stdio("asks.py", mode="legacy")), options(**pool_options))
    async with pool:
        with anyio.fail_after(SETTLE_TIMEOUT):
            await pool.wait_settled()
        assert pool.health()["asks"]["protocol_version"] == "2025-11-25"
        yield pool


async def held(pool: McpPool) -> tuple[str, str]:
    """Calls book_table; returns the question's key and the state the answer goes back with."""
    outcome = await pool.call_tool("asks__book_table", LUIGI)
    needed = outcome.input_needed
    assert needed is not None and needed.state is not None, outcome.content
    assert (outcome.is_error, json.loads(outcome.content)["status"]) == (False, "input_required")
    [(key, params)] = needed.requests.items()
    assert params["mode"] == "form" and params["message"].startswith("Booking a table at Luigi")
    assert set(params["requestedSchema"]["properties"]) == {"party_size", "time"}
    return key, needed.state


async def answer(pool: McpPool, key: str, state: str, result: dict[str, Any]) -> ToolOutcome:
    return await pool.call_tool("asks__book_table", LUIGI, answers=ToolAnswers({key: result}, state))


async def test_the_call_waits_for_the_answer_past_its_time_limit_and_books_the_table() -> None:
    async with legacy_pool(call_timeout=1) as pool:
        key, state = await held(pool)
        assert held_state(state) == key
        await anyio.sleep(1.5)  # past the call's time limit: the person's time does not count against it
        booked = await answer(pool, key, state, FOUR_AT_SEVEN)
        assert (readable(booked.content), booked.is_error, booked.input_needed) == (
            "booked Luigi for 4 at 19:00", False, None)
        again = await answer(pool, key, state, FOUR_AT_SEVEN)  # the same answer twice reaches the server once
    assert again.is_error and "no longer waits for this answer" in again.content
    assert "Call the tool again" in again.content and again.retryable


async def test_decline_and_cancel_reach_the_server() -> None:
    async with legacy_pool() as pool:
        key, state = await held(pool)
        declined = await answer(pool, key, state, {"action": "decline"})
        key, state = await held(pool)
        cancelled = await answer(pool, key, state, {"action": "cancel"})
    assert readable(declined.content) == "no booking at Luigi: the person chose decline"
    assert readable(cancelled.content) == "no booking at Luigi: the person chose cancel"


async def test_an_answer_no_call_waits_for_is_told_so_and_sends_nothing() -> None:
    # Another replica's question, or one from before a restart: this process holds no such call.
    async with legacy_pool() as pool:
        outcome = await answer(pool, "k", "toolbridge-held:not-a-held-call", FOUR_AT_SEVEN)
        unusable = await answer(pool, "k", "toolbridge-held:x", {"action": "maybe"})
    assert outcome.is_error and "in the gateway process that asked it" in outcome.content
    assert unusable.is_error and "could not be used" in unusable.content


async def test_a_question_nobody_answers_in_time_is_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(held_calls, "HOLD_SECONDS", 0.3)
    async with legacy_pool() as pool:
        with capture_logs() as logs:
            key, state = await held(pool)
            with anyio.fail_after(10):
                while not any(line["event"] == "mcp_elicitation_expired" for line in logs):
                    await anyio.sleep(0.05)  # polled, bounded: the hold ends 0.3 s after the question
        late = await answer(pool, key, state, FOUR_AT_SEVEN)
    assert late.is_error and "no longer waits for this answer" in late.content


async def test_two_calls_running_on_one_server_do_not_get_each_others_question() -> None:
    # Over stdio nothing says which call a question is for: with two running, it is declined, never guessed.
    async with legacy_pool() as pool:
        outcomes: list[ToolOutcome] = []

        async def book() -> None:
            outcomes.append(await pool.call_tool("asks__book_table", LUIGI))

        async with anyio.create_task_group() as group:
            group.start_soon(book)
            group.start_soon(book)
    texts = [readable(o.content) for o in outcomes if o.input_needed is None]
    assert "no booking at Luigi: the person chose decline" in texts
    assert not any(text.startswith("booked") for text in texts)


async def test_an_answer_to_a_question_the_server_withdrew_gets_the_calls_own_result() -> None:
    async with legacy_pool() as pool:
        with capture_logs() as logs:
            outcome = await pool.call_tool("asks__book_quickly", LUIGI)
            assert outcome.input_needed is not None and outcome.input_needed.state
            [key] = outcome.input_needed.requests
            with anyio.fail_after(10):
                while not any(line["event"] == "mcp_elicitation_withdrawn" for line in logs):
                    await anyio.sleep(0.05)  # polled, bounded: the server withdraws it after a second
        late = await pool.call_tool("asks__book_quickly", LUIGI,
                                    answers=ToolAnswers({key: FOUR_AT_SEVEN}, outcome.input_needed.state))
    # Nothing of the answer reached the server; the model learns what the call itself came to.
    assert (readable(late.content), late.is_error) == ("no booking at Luigi: nobody answered within a second", False)


async def test_a_call_asks_at_most_three_questions_the_fourth_is_declined() -> None:
    yes = {"action": "accept", "content": {"ok": True}}
    async with legacy_pool() as pool:
        outcome = await pool.call_tool("asks__ask_forever", "{}")
        for number in (1, 2, 3):
            needed = outcome.input_needed
            assert needed is not None and needed.state, outcome.content
            [(key, params)] = needed.requests.items()
            assert params["message"] == f"Question {number}: go on?"
            outcome = await pool.call_tool("asks__ask_forever", "{}", answers=ToolAnswers({key: yes}, needed.state))
    assert (readable(outcome.content), outcome.input_needed) == ("stopped at question 4: decline", None)


async def book_as(pool: McpPool, owner: str, restaurant: str = "Luigi") -> ToolOutcome:
    """book_table called with `owner`'s key (the digest the guard sets for a key of the keys file)."""
    token = CURRENT_SCOPE.set(KeyScope(frozenset({"asks"}), caller=owner))
    try:
        return await pool.call_tool("asks__book_table", json.dumps({"restaurant": restaurant}))
    finally:
        CURRENT_SCOPE.reset(token)


async def test_past_a_keys_bound_its_next_question_is_declined_and_the_model_told_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(held_calls, "HELD_PER_KEY", 2)
    async with legacy_pool() as pool:
        first, second = [await book_as(pool, "alice", name) for name in ("A", "B")]
        with capture_logs() as logs:
            third = await book_as(pool, "alice", "C")
        bobs = await book_as(pool, "bob")  # another key's question is held all the same
        assert first.input_needed and second.input_needed and bobs.input_needed
        assert (third.is_error, third.error_kind, third.input_needed) == (True, "questions_waiting", None)
        assert third.error_message is not None and third.error_message.startswith(
            "2 questions from MCP server 'asks' already wait for this person's answer")
        assert "answer or cancel those first" in third.error_message
        assert [line["reason"] for line in logs if line["event"] == "mcp_elicitation_declined"] == [
            "too many calls wait for people"]
        [(key, _)] = first.input_needed.requests.items()
        assert first.input_needed.state is not None
        booked = await answer(pool, key, first.input_needed.state, FOUR_AT_SEVEN)  # her first still waits, whole
        again = await book_as(pool, "alice", "D")  # and its answer made room for another
    assert readable(booked.content) == "booked A for 4 at 19:00"
    assert again.input_needed is not None


async def test_past_a_servers_bound_every_keys_next_question_is_declined(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(held_calls, "HELD_PER_SERVER", 3)
    async with legacy_pool() as pool:
        held = [await book_as(pool, owner) for owner in ("alice", "bob", "")]
        declined = [await book_as(pool, owner) for owner in ("carol", "")]
    assert all(outcome.input_needed for outcome in held)
    assert [(outcome.error_kind, (outcome.error_message or "")[:60]) for outcome in declined] == [
        ("questions_waiting", "3 questions from MCP server 'asks' already wait for people's")] * 2


async def test_callers_without_a_key_of_their_own_are_bound_by_the_server_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No keys (or the operator's keys, which see everything): one caller, "", as the store counts them.
    monkeypatch.setattr(held_calls, "HELD_PER_KEY", 1)
    async with legacy_pool() as pool:
        held = [await book_as(pool, "") for _ in range(3)]
    assert all(outcome.input_needed for outcome in held)
