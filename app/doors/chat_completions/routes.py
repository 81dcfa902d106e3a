"""The Chat Completions door's routes: the chat service's answer (app/chat/service.py), streamed as server-sent
events or sent whole. Its POST also takes the chat lane (app/api/chat_lane.py), past FastAPI's routing."""

from collections.abc import Mapping

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.api.chat_body import parse_chat_body
from app.api.doors import answer_turn, read_body, send_stream, send_whole
from app.chat import Turn, chat_cut_off
from app.doors.door import FrontDoor, openai_error
from app.openai.errors import MethodNotAllowed

CHAT_PATH = "/v1/chat/completions"
router = APIRouter()


@router.post(CHAT_PATH)
async def chat_completions(raw: Request) -> Response:
    """The chat service's answer (app/chat/service.py), streamed as server-sent events or sent whole."""
    # Nothing for FastAPI to resolve on the busiest route: its dependency solving cost a tenth of a request.
    body, _ = await read_body(raw, parse_chat_body)
    turn = Turn.from_request(body, raw.headers)
    reply, person = await answer_turn(raw, turn)
    if turn.stream:
        return send_stream(raw, reply.payloads(person), encode=_server_sent, cut_off=chat_cut_off)
    return await send_whole(raw, reply.completion(person))


def _server_sent(payload: Mapping[str, object] | str) -> bytes:
    """One SSE event (a chunk, an error's envelope, or DONE), encoded here (sse-starlette sends bytes as they are)."""
    return b"data: " + (payload.encode() if isinstance(payload, str) else orjson.dumps(payload)) + b"\n\n"


@router.api_route(CHAT_PATH, methods=["GET", "PUT", "PATCH", "DELETE"], include_in_schema=False)
async def chat_completions_other_methods(request: Request) -> Response:
    raise MethodNotAllowed(request.method, request.url.path, "POST")


# The first door of the registry: it also answers for every path no door owns (the rest of /v1, /tools, /health).
DOOR = FrontDoor("chat", (CHAT_PATH,), router, openai_error)
