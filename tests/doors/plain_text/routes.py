"""The plain-text door's route, DOOR and exchange: `{"model", "text"}` in, the answer's text out, whole or streamed."""

from collections.abc import Callable
from dataclasses import dataclass

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.api.doors import serve_chat
from app.chat import ChatPayload, ChatReply, PersonView
from app.doors.door import Answer, DoorContext, FrontDoor, Stream, Streamed, Timing, Whole
from app.openai.errors import GatewayError, InvalidRequest
from app.openai.wire import Completion, JSONObject

PATH = "/test/chat"
router = APIRouter()


@router.post(PATH)
async def chat(raw: Request) -> Response:
    return await serve_chat(raw, DOOR)


@dataclass(frozen=True)
class PlainExchange:
    """The door's request: one user message, streamed or not."""

    text: str
    model: str
    stream: bool

    @classmethod
    def parse(cls, body: JSONObject) -> "PlainExchange":
        text, model = body.get("text"), body.get("model", "m")
        if not isinstance(text, str) or not text:
            raise InvalidRequest("`text` is required: what to ask.", param="text")
        return cls(text, str(model), bool(body.get("stream")))

    async def chat_body(self, context: Callable[[], DoorContext]) -> JSONObject:
        return {"model": self.model, "messages": [{"role": "user", "content": self.text}], "stream": self.stream}

    def render(self, reply: ChatReply, person: PersonView | None, timing: Timing) -> Streamed | Whole:
        if self.stream:
            return Stream(reply.payloads(person), _text, lambda: (), media_type="text/plain")
        return Answer(reply.completion(person), _whole_text, media_type="text/plain; charset=utf-8")


def _text(payload: ChatPayload) -> bytes:
    """A chunk's text; the stream's end ("[DONE]"), errors and chunks without text are nothing."""
    if isinstance(payload, str) or "choices" not in payload:
        return b""
    choices = payload["choices"] or [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": None}]
    return str(choices[0]["delta"].get("content") or "").encode()


def _whole_text(completion: Completion) -> bytes:
    return str(completion["choices"][0]["message"].get("content") or "").encode()


def plain_error(error: GatewayError) -> JSONObject:
    return {"plain_error": error.message}


DOOR = FrontDoor("plain", ("/test/",), router, plain_error, PlainExchange.parse)
