"""A test MCP server whose tools need the person's input: a form question and a URL to open.

On a 2026-era connection both tools answer the first call with an `InputRequiredResult` (`resultType:
"input_required"`) and finish when the client retries with `inputResponses` and the echoed `requestState`;
on a 2025-era (`mode="legacy"`) connection `book_table` pushes `elicitation/create` mid-call instead, and
`book_late` (for those connections only) asks two questions, one after the other, `book_quickly` withdraws
its question after a second, and `ask_forever` asks again after every answer.

The request state is sealed with a fixed key (`ASKS_STATE_KEY` overrides it), not the SDK's default
per-process key, so a retry made through a new connection, which over stdio is a new process of this server,
is accepted: the way toolbridge's replicas each start their own copy.
Run: `python asks.py` (stdio), `python asks.py http PORT`, or import `server` for in-process HTTP.
"""

import os
import sys
from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve
from mcp.server.request_state import RequestStateSecurity
from mcp.types import ElicitRequest, ElicitRequestURLParams, ElicitResult, InputRequiredResult
from pydantic import BaseModel, Field

STATE_KEY = os.environ.get("ASKS_STATE_KEY", "toolbridge-tests-asks-request-state-key-0123456789")
SIGN_IN_URL = "https://example.test/sign-in"

server = MCPServer("asks", version="1.0.0", request_state_security=RequestStateSecurity(keys=[STATE_KEY]))


class Booking(BaseModel):
    party_size: int = Field(title="Party size", description="How many people", ge=1, le=20)
    time: str = Field(title="Time", description="When, as HH:MM")


def _booking(restaurant: str) -> Elicit[Booking]:
    return Elicit(f"Booking a table at {restaurant}: for how many people, and when?", Booking)


@server.tool()
async def book_table(restaurant: str, booking: Annotated[ElicitationResult[Booking], Resolve(_booking)]) -> str:
    """Books a table; asks the person for the party size and the time first."""
    if booking.action != "accept":
        return f"no booking at {restaurant}: the person chose {booking.action}"
    return f"booked {restaurant} for {booking.data.party_size} at {booking.data.time}"


class Confirm(BaseModel):
    ok: bool = Field(title="OK", description="Take the later time")


@server.tool()
async def book_late(restaurant: str, ctx: Context) -> str:
    """For 2025-era connections: asks for the booking, then whether a later time will do (two questions)."""
    booking = await ctx.elicit(f"Booking a table at {restaurant}: for how many people, and when?", Booking)
    if booking.action != "accept":
        return f"no booking at {restaurant}: the person chose {booking.action}"
    later = await ctx.elicit(f"{restaurant} is full at {booking.data.time}; 21:00 instead?", Confirm)
    if later.action != "accept" or not later.data.ok:
        return f"no booking at {restaurant}: the later time was not taken"
    return f"booked {restaurant} for {booking.data.party_size} at 21:00"


@server.tool()
async def book_quickly(restaurant: str, ctx: Context) -> str:
    """For 2025-era connections: asks for the booking, but withdraws the question after a second."""
    with anyio.move_on_after(1):
        booking = await ctx.elicit(f"Booking a table at {restaurant}: for how many people, and when?", Booking)
        return f"booked {restaurant} for {booking.data.party_size} at {booking.data.time}"
    return f"no booking at {restaurant}: nobody answered within a second"


@server.tool()
async def ask_forever(ctx: Context) -> str:
    """For 2025-era connections: asks again after every accepted answer, until one is not accepted."""
    asked = 0
    while True:
        asked += 1
        answer = await ctx.elicit(f"Question {asked}: go on?", Confirm)
        if answer.action != "accept":
            return f"stopped at question {asked}: {answer.action}"


@server.tool()
async def sign_in(service: str, ctx: Context) -> str | InputRequiredResult:
    """Needs the person to sign in at a web page first (a URL-mode question), then says it is signed in."""
    answer = (ctx.input_responses or {}).get("sign_in")
    if isinstance(answer, ElicitResult) and ctx.request_state == f"sign-in:{service}":
        if answer.action == "accept":
            return f"signed in to {service}"
        return f"not signed in to {service}: the person chose {answer.action}"
    question = ElicitRequestURLParams(
        message=f"Sign in to {service} to continue.", url=f"{SIGN_IN_URL}?service={service}"
    )
    return InputRequiredResult(
        input_requests={"sign_in": ElicitRequest(params=question)}, request_state=f"sign-in:{service}"
    )


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
