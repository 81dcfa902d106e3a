"""A 2026-era server's `input_required` through a real McpPool over stdio (tests/support/mcp_servers/asks.py): the
questions come back as the call's `input_needed`, and the call sent again with the person's answers and the
server's state finishes, also from another pool (another process of the server: what another replica does)."""

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from app.chat.ports import ToolAnswers
from app.mcp.config import HttpServerConfig, ServerConfig
from app.mcp.pool import McpPool
from app.mcp.results import ToolOutcome
from app.ops.call_record import CallRecord
from app.ops.recent_calls import RecentCalls
from tests.mcp.test_pool import SETTLE_TIMEOUT, RemoteServer, config, options, stdio
from tests.support.fake_upstream import readable

pytestmark = pytest.mark.anyio
LUIGI = '{"restaurant": "Luigi"}'


@asynccontextmanager
async def asks_pool(records: list[CallRecord] | None = None, remote: ServerConfig | None = None,
                    **server: Any) -> AsyncIterator[McpPool]:
    pool = McpPool(config(asks=remote or stdio("asks.py", **server)), options(),
                   on_tool_call=None if records is None else records.append)
    async with pool:
        with anyio.fail_after(SETTLE_TIMEOUT):
            await pool.wait_settled()
        assert pool.health()["asks"]["protocol_version"] == "2026-07-28"
        yield pool


async def asked(pool: McpPool, tool: str = "asks__book_table", arguments: str = LUIGI) -> tuple[str, ToolOutcome]:
    outcome = await pool.call_tool(tool, arguments)
    assert outcome.input_needed is not None, outcome.content
    [key] = outcome.input_needed.requests
    return key, outcome


async def test_a_form_question_comes_back_and_the_answer_books_the_table() -> None:
    records: list[CallRecord] = []
    async with asks_pool(records) as pool:
        key, outcome = await asked(pool)
        needed = outcome.input_needed
        assert needed is not None and needed.state
        assert (outcome.is_error, outcome.retryable) == (False, False)
        assert json.loads(outcome.content)["status"] == "input_required"
        params = needed.requests[key]
        assert params["mode"] == "form" and params["message"].startswith("Booking a table at Luigi")
        assert set(params["requestedSchema"]["properties"]) == {"party_size", "time"}
        accept = {key: {"action": "accept", "content": {"party_size": 4, "time": "19:30"}}}
        booked = await pool.call_tool("asks__book_table", LUIGI, answers=ToolAnswers(accept, needed.state))
        declined = await pool.call_tool("asks__book_table", LUIGI,
                                        answers=ToolAnswers({key: {"action": "decline"}}, needed.state))
    assert (readable(booked.content), booked.is_error, booked.input_needed) == (
        "booked Luigi for 4 at 19:30", False, None)
    assert readable(declined.content) == "no booking at Luigi: the person chose decline"
    assert [record.outcome for record in records] == ["input_needed", "ok", "ok"]
    recent = RecentCalls()
    recent.add(records[0])
    assert recent.entries()[0] | {"at": 0} == {"at": 0, "number": 1, "request_id": None, "server": "asks",
                                              "tool": "book_table", "duration_ms": recent.entries()[0]["duration_ms"],
                                              "outcome": "input_needed", "error": None}


async def test_the_answer_is_taken_by_another_process_of_the_server() -> None:
    async with asks_pool() as first:
        key, outcome = await asked(first)
    assert outcome.input_needed is not None
    accept = {key: {"action": "accept", "content": {"party_size": 2, "time": "20:00"}}}
    async with asks_pool() as second:  # a new pool starts its own process, as another replica would
        booked = await second.call_tool("asks__book_table", LUIGI,
                                        answers=ToolAnswers(accept, outcome.input_needed.state))
    assert (readable(booked.content), booked.is_error) == ("booked Luigi for 2 at 20:00", False)


async def test_over_http_one_gateway_asks_and_another_sends_the_answer() -> None:
    remote = RemoteServer("asks.py")
    await remote.start()
    try:
        async with asks_pool(remote=HttpServerConfig(url=remote.url)) as first:
            key, outcome = await asked(first)
        assert outcome.input_needed is not None
        accept = {key: {"action": "accept", "content": {"party_size": 3, "time": "12:00"}}}
        async with asks_pool(remote=HttpServerConfig(url=remote.url)) as second:
            booked = await second.call_tool("asks__book_table", LUIGI,
                                            answers=ToolAnswers(accept, outcome.input_needed.state))
    finally:
        remote.kill()
    assert (readable(booked.content), booked.is_error) == ("booked Luigi for 3 at 12:00", False)


async def test_a_state_the_server_refuses_tells_the_model_to_call_again() -> None:
    records: list[CallRecord] = []
    async with asks_pool(records) as pool:
        key, _ = await asked(pool)
        accept = {key: {"action": "accept", "content": {"party_size": 4, "time": "19:30"}}}
        forged = await pool.call_tool("asks__book_table", LUIGI, answers=ToolAnswers(accept, "v1.forged"))
        after = await pool.call_tool("asks__book_table", LUIGI)
    assert forged.is_error and forged.input_needed is None and not forged.retryable
    data = json.loads(forged.content)["data"]
    assert data["error"] == "server_error"
    assert data["message"].startswith("The person's answer came too late or could not be used")
    assert "Invalid or expired requestState" in data["message"] and "Call the tool again" in data["message"]
    assert after.input_needed is not None  # the server is fine: the call asks anew
    assert [record.outcome for record in records] == ["input_needed", "server_error", "input_needed"]


async def test_a_state_sealed_by_another_key_is_refused_the_same_way() -> None:
    # A server that seals with a key of its own per process (the SDK's default) cannot take an answer
    # through another process: what a 2026 stdio server without a shared key means for replicas.
    async with asks_pool(env={"ASKS_STATE_KEY": "one-key-0123456789-0123456789-0123456789"}) as first:
        key, outcome = await asked(first)
    assert outcome.input_needed is not None
    accept = {key: {"action": "accept", "content": {"party_size": 2, "time": "20:00"}}}
    async with asks_pool(env={"ASKS_STATE_KEY": "another-key-0123456789-0123456789-01234"}) as second:
        refused = await second.call_tool("asks__book_table", LUIGI,
                                         answers=ToolAnswers(accept, outcome.input_needed.state))
    assert refused.is_error and "came too late or could not be used" in readable(refused.content)


async def test_a_url_question_comes_back_with_its_link_and_done_signs_in() -> None:
    arguments = '{"service": "calendar"}'
    async with asks_pool() as pool:
        key, outcome = await asked(pool, "asks__sign_in", arguments)
        assert outcome.input_needed is not None
        assert outcome.input_needed.requests[key] == {
            "mode": "url", "message": "Sign in to calendar to continue.",
            "url": "https://example.test/sign-in?service=calendar"}
        done = await pool.call_tool("asks__sign_in", arguments,
                                    answers=ToolAnswers({key: {"action": "accept"}}, outcome.input_needed.state))
    assert (readable(done.content), done.is_error) == ("signed in to calendar", False)


async def test_an_answer_that_is_not_an_elicitation_result_is_refused_before_sending() -> None:
    async with asks_pool() as pool:
        key, outcome = await asked(pool)
        assert outcome.input_needed is not None
        wrong = await pool.call_tool("asks__book_table", LUIGI,
                                     answers=ToolAnswers({key: {"action": "maybe"}}, outcome.input_needed.state))
    assert wrong.is_error and json.loads(wrong.content)["data"]["error"] == "invalid_arguments"


async def test_answers_the_server_cannot_take_ask_again_or_fail_as_the_tool() -> None:
    async with asks_pool() as pool:
        key, outcome = await asked(pool)
        assert outcome.input_needed is not None
        accept = {key: {"action": "accept", "content": {"party_size": 4, "time": "19:30"}}}
        stateless = await pool.call_tool("asks__book_table", LUIGI, answers=ToolAnswers(accept, None))
        wrong = {key: {"action": "accept", "content": {"party_size": "many", "time": "19:30"}}}
        mistyped = await pool.call_tool("asks__book_table", LUIGI,
                                        answers=ToolAnswers(wrong, outcome.input_needed.state))
    assert stateless.input_needed is not None and not stateless.is_error  # without its state: the server asks again
    assert set(stateless.input_needed.requests) == {key}
    assert mistyped.is_error and mistyped.input_needed is None and mistyped.error_kind == "tool_error"
    assert "does not match the requested schema" in (mistyped.error_message or "")
