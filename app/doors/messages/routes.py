"""Anthropic's Messages API's door (`POST /v1/messages`): its request made a chat body, the answer spelled as a
message. `POST /v1/messages/count_tokens` is not a door: it goes to the upstream as is (routes.py)."""

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.api.doors import serve_chat
from app.doors.door import FrontDoor
from app.doors.messages.answer import MessagesExchange
from app.doors.messages.errors import anthropic_error_body
from app.openai.errors import MethodNotAllowed

MESSAGES_PATH = "/v1/messages"
router = APIRouter()


@router.post(MESSAGES_PATH)
async def messages(raw: Request) -> Response:
    """The chat service's answer to a Messages request, streamed as Anthropic's events or sent as one message."""
    return await serve_chat(raw, DOOR)


@router.api_route(MESSAGES_PATH, methods=["GET", "PUT", "PATCH", "DELETE"], include_in_schema=False)
async def messages_other_methods(request: Request) -> Response:
    raise MethodNotAllowed(request.method, request.url.path, "POST")


# Its errors in Anthropic's shape under /v1/messages, count_tokens (passed through to the upstream) included.
DOOR = FrontDoor("messages", (MESSAGES_PATH,), router, anthropic_error_body, MessagesExchange.parse)
