"""Anthropic's Messages API's door (`POST /v1/messages`): its request made a chat body, the answer spelled as a
message. `POST /v1/messages/count_tokens` is not a door: it goes to the upstream as is (routes.py)."""

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.api.doors import answer, read_json_object, send_stream, send_whole
from app.doors.door import FrontDoor
from app.doors.messages.answer import message_events, messages_cut_off, server_sent, whole_message
from app.doors.messages.errors import anthropic_error_body
from app.doors.messages.request import chat_body
from app.openai.errors import MethodNotAllowed

MESSAGES_PATH = "/v1/messages"
router = APIRouter()


@router.post(MESSAGES_PATH)
async def messages(raw: Request) -> Response:
    """The chat service's answer to a Messages request, streamed as Anthropic's events or sent as one message."""
    chat = await read_json_object(raw, chat_body)
    reply, person = await answer(raw, DOOR, chat)
    if chat["stream"]:
        return send_stream(raw, message_events(reply, person), encode=server_sent, cut_off=messages_cut_off)
    return await send_whole(raw, whole_message(reply, person))


@router.api_route(MESSAGES_PATH, methods=["GET", "PUT", "PATCH", "DELETE"], include_in_schema=False)
async def messages_other_methods(request: Request) -> Response:
    raise MethodNotAllowed(request.method, request.url.path, "POST")


# Its errors in Anthropic's shape under /v1/messages, count_tokens (passed through to the upstream) included.
DOOR = FrontDoor("messages", (MESSAGES_PATH,), router, anthropic_error_body)
