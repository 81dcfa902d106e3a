"""The Chat Completions door: the request is itself the chat body; the answer its chunks as server-sent events, or
one completion. Its POST also takes the chat lane (app/api/chat_lane.py), past FastAPI's routing."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.api.doors import serve_chat
from app.chat import ChatReply, PersonView, chat_cut_off
from app.doors.door import Answer, DoorContext, FrontDoor, Stream, Streamed, Timing, Whole, openai_error
from app.openai.errors import MethodNotAllowed
from app.openai.wire import JSONObject

CHAT_PATH = "/v1/chat/completions"
router = APIRouter()


@router.post(CHAT_PATH)
async def chat_completions(raw: Request) -> Response:
    """The chat service's answer (app/chat/service.py), streamed as server-sent events or sent whole."""
    # Nothing for FastAPI to resolve on the busiest route: its dependency solving cost a tenth of a request.
    return await serve_chat(raw, DOOR)


@dataclass(frozen=True)
class ChatExchange:
    """A Chat Completions request: its body is the chat body, checked by the app before the turn is read."""

    body: JSONObject

    async def chat_body(self, context: Callable[[], DoorContext]) -> JSONObject:
        return self.body

    def render(self, reply: ChatReply, person: PersonView | None, timing: Timing) -> Streamed | Whole:
        if self.body.get("stream") is True:  # checked to be a bool with the rest of the body
            return Stream(reply.payloads(person), _server_sent, chat_cut_off)
        return Answer(reply.completion(person))


def _server_sent(payload: Mapping[str, object] | str) -> bytes:
    """One SSE event (a chunk, an error's envelope, or DONE), encoded here (sse-starlette sends bytes as they are)."""
    return b"data: " + (payload.encode() if isinstance(payload, str) else orjson.dumps(payload)) + b"\n\n"


@router.api_route(CHAT_PATH, methods=["GET", "PUT", "PATCH", "DELETE"], include_in_schema=False)
async def chat_completions_other_methods(request: Request) -> Response:
    raise MethodNotAllowed(request.method, request.url.path, "POST")


# The first door of the registry: it also answers for every path no door owns (the rest of /v1, /tools, /health).
DOOR = FrontDoor("chat", (CHAT_PATH,), router, openai_error, ChatExchange)
