"""The asks.py test server over real stdio, as toolbridge will meet it: a 2026-era `input_required` question
answered from a new connection (a new process of the server, as another replica would start), the words of
the person read by app/chat/questions.py becoming the answer, a URL question, and the 2025-era push."""

import sys
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client import ClientRequestContext
from mcp.types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestParams,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
    TextContent,
)

from app.chat.asking.questions import Accepted, form_question, read_answer, read_url_answer, url_question
from tests.conftest import SERVERS

pytestmark = pytest.mark.anyio


async def _never(ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
    raise AssertionError("the question was to be answered by hand, not by the callback")


def _client(**options: Any) -> Client:
    # A registered callback is what declares elicitation (form and url); the server refuses to ask without it.
    options.setdefault("elicitation_callback", _never)
    server = StdioServerParameters(command=sys.executable, args=[str(SERVERS / "asks.py")])
    return Client(server, read_timeout_seconds=30, **options)


def _text(result: CallToolResult | InputRequiredResult) -> str:
    assert isinstance(result, CallToolResult) and isinstance(result.content[0], TextContent)
    return result.content[0].text


async def _ask(tool: str, arguments: dict[str, Any]) -> tuple[str, ElicitRequest, str]:
    async with _client() as client:
        result = await client.session.call_tool(tool, arguments, allow_input_required=True)
    assert isinstance(result, InputRequiredResult) and result.request_state and result.input_requests
    [(key, request)] = result.input_requests.items()
    assert isinstance(request, ElicitRequest)
    return key, request, result.request_state


async def test_a_form_question_is_answered_in_words_through_a_new_connection() -> None:
    key, request, state = await _ask("book_table", {"restaurant": "Luigi"})
    assert isinstance(request.params, ElicitRequestFormParams)
    asked = form_question(request.params.message, request.params.requested_schema, "asks")
    assert "Booking a table at Luigi" in asked and "**Party size** (`party_size`)" in asked
    answer = read_answer("party size: 4\ntime: 19:30", request.params.requested_schema)
    assert isinstance(answer, Accepted)
    async with _client() as client:  # another process of the server: the fixed key opens the state
        result = await client.session.call_tool(
            "book_table", {"restaurant": "Luigi"}, allow_input_required=True, request_state=state,
            input_responses={key: ElicitResult(action="accept", content=answer.content)})
        assert _text(result) == "booked Luigi for 4 at 19:30"
        declined = await client.call_tool("book_table", {"restaurant": "Luigi"}, request_state=state,
                                          input_responses={key: ElicitResult(action="decline")})
        assert _text(declined) == "no booking at Luigi: the person chose decline"


async def test_a_url_question_goes_on_when_the_person_says_done() -> None:
    key, request, state = await _ask("sign_in", {"service": "calendar"})
    assert isinstance(request.params, ElicitRequestURLParams)
    assert request.params.url == "https://example.test/sign-in?service=calendar"
    assert "<https://example.test/sign-in?service=calendar>" in url_question(
        request.params.message, request.params.url, "asks")
    assert read_url_answer("done") == Accepted({})
    async with _client() as client:
        done = {key: ElicitResult(action="accept")}
        result = await client.session.call_tool("sign_in", {"service": "calendar"}, allow_input_required=True,
                                                request_state=state, input_responses=done)
        assert _text(result) == "signed in to calendar"


async def test_a_2025_era_connection_gets_the_question_pushed_mid_call() -> None:
    seen: list[ElicitRequestParams] = []

    async def answer(ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        seen.append(params)
        return ElicitResult(action="accept", content={"party_size": 2, "time": "20:00"})

    async with _client(mode="legacy", elicitation_callback=answer) as client:
        assert client.protocol_version == "2025-11-25"
        assert _text(await client.call_tool("book_table", {"restaurant": "Luigi"})) == "booked Luigi for 2 at 20:00"
    [params] = seen
    assert isinstance(params, ElicitRequestFormParams) and set(params.requested_schema["properties"]) == {
        "party_size", "time"}
