"""A tools/call on a 2026-era connection, where the server may answer `input_required` (MCP 2026-07-28) instead of
a result: its questions for the person (elicitation) come back with its sealed state, to be answered in a later
request, on any replica; what the client answers by itself (sampling, roots) is answered here and the call sent
again, as the SDK's `Client.call_tool` does.

`Client.call_tool` would hand every question to the elicitation callback and retry at once, while nobody is there
to answer; so the rounds are driven here with `session.call_tool(..., allow_input_required=True)`, which checks a
result against the tool's output schema just as `Client.call_tool` does. What the session alone leaves out, the
re-list and resend once on `HEADER_MISMATCH`, is done here too. A round that asks the person and also asks for
sampling or roots comes back with the person's questions only: the server asks for the rest again when the
person's answers arrive, and those are answered then.
"""


import anyio
from mcp import Client, MCPError
from mcp.client import ClientRequestContext, InputRequiredRoundsExceededError
from mcp.shared.dispatcher import ProgressFnT
from mcp.types import (
    HEADER_MISMATCH,
    CallToolResult,
    ElicitRequest,
    ErrorData,
    InputRequiredResult,
    InputResponses,
)
from pydantic import ValidationError

from app.chat.ports import InputNeeded
from app.mcp.tasks import TaskHandle
from app.openai.wire import JSONObject

# A server that sends only its state back (no question) is asked again after a short, growing wait (as the SDK).
FIRST_WAIT, LONGEST_WAIT = 0.05, 0.25
# Pages of tools/list walked to find the tool again after a HEADER_MISMATCH (the SDK's own bound).
RELIST_PAGES = 50


def asks_the_person(result: InputRequiredResult) -> bool:
    return any(isinstance(request, ElicitRequest) for request in (result.input_requests or {}).values())


def input_needed(result: InputRequiredResult) -> InputNeeded:
    """The person's questions in the result as JSON (each key: its ElicitRequest's params), and the state."""
    requests = {key: request.params.model_dump(by_alias=True, mode="json", exclude_none=True)
                for key, request in (result.input_requests or {}).items() if isinstance(request, ElicitRequest)}
    return InputNeeded(requests, result.request_state)


async def call_tool(client: Client, name: str, arguments: JSONObject, *, read_timeout: float, progress: ProgressFnT,
                    responses: InputResponses | None, state: str | None
                    ) -> CallToolResult | InputRequiredResult | TaskHandle:
    """The call's result, the `InputRequiredResult` that asks the person (see `asks_the_person`), or the task the
    server made of the call (tasks.py).

    Raises what `Client.call_tool` raises: MCPError, the output schema's RuntimeError, and
    InputRequiredRoundsExceededError for a server that never stops asking the client itself."""
    wait = FIRST_WAIT
    for _ in range(client.input_required_max_rounds + 1):
        result = await _send(client, name, arguments, read_timeout, progress, responses, state)
        if isinstance(result, CallToolResult | TaskHandle) or asks_the_person(result):
            return result
        if result.input_requests:
            wait, responses = FIRST_WAIT, await _answered(client, result)
        else:
            await anyio.sleep(wait)
            wait, responses = min(wait * 2, LONGEST_WAIT), None
        state = result.request_state
    raise InputRequiredRoundsExceededError(client.input_required_max_rounds)


async def _send(client: Client, name: str, arguments: JSONObject, read_timeout: float, progress: ProgressFnT,
                responses: InputResponses | None, state: str | None
                ) -> CallToolResult | InputRequiredResult | TaskHandle:
    async def once() -> CallToolResult | InputRequiredResult | TaskHandle:
        result = await client.session.call_tool(name, arguments, read_timeout_seconds=read_timeout,
                                                progress_callback=progress, input_responses=responses,
                                                request_state=state, allow_input_required=True, allow_claimed=True)
        if not isinstance(result, CallToolResult | InputRequiredResult | TaskHandle):  # no other extension claims
            raise RuntimeError(f"an unexpected result ({type(result).__name__})")
        return result

    try:
        return await once()
    except MCPError as mismatch:
        if mismatch.code != HEADER_MISMATCH:
            raise
        # The spec's recovery, as Client.call_tool does it: the tool's listing is missing or stale; list, resend.
        try:
            await _relist(client, name)
        except (MCPError, ValidationError) as failed:
            raise mismatch from failed
        return await once()


async def _relist(client: Client, name: str) -> None:
    cursor: str | None = None
    for _ in range(RELIST_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        cursor = page.next_cursor
        if cursor is None or any(tool.name == name for tool in page.tools):
            return


async def _answered(client: Client, result: InputRequiredResult) -> InputResponses:
    """The client's own answers (sampling, roots) through its callbacks; one after another, as they are rare."""
    session = client.session
    responses: InputResponses = {}
    for key, request in (result.input_requests or {}).items():
        context = ClientRequestContext(session=session, request_id=key,
                                       meta=request.params.meta if request.params else None)
        answer = await session.dispatch_input_request(context, request)
        if isinstance(answer, ErrorData):
            raise MCPError.from_error_data(answer)
        responses[key] = answer
    return responses
