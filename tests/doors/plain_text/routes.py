"""The plain-text door's route and DOOR: `{"model", "text"}` in, the answer's text out, whole or streamed."""

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response

from app.api.doors import answer, read_json_object, request_cutoff, send_stream, watched
from app.doors.door import FrontDoor
from app.openai.errors import GatewayError, InvalidRequest

PATH = "/test/chat"
router = APIRouter()


def chat_body(body: dict[str, Any]) -> dict[str, Any]:
    """The door's request as a chat body: one user message."""
    text = body.get("text")
    if not isinstance(text, str) or not text:
        raise InvalidRequest("`text` is required: what to ask.", param="text")
    return {"model": body.get("model", "m"), "messages": [{"role": "user", "content": text}],
            "stream": bool(body.get("stream"))}


@router.post(PATH)
async def chat(raw: Request) -> Response:
    body = await read_json_object(raw, chat_body)
    reply, person = await answer(raw, DOOR, body)
    if body["stream"]:
        return send_stream(raw, reply.payloads(person), encode=_text, cut_off=lambda: (), media_type="text/plain")
    try:
        completion = await watched(raw, reply.completion(person))
    finally:
        request_cutoff(raw).end()
    return PlainTextResponse(completion["choices"][0]["message"]["content"])


def _text(payload: dict[str, Any] | str) -> bytes:
    """A chunk's text; the stream's end ("[DONE]") and chunks without text are nothing."""
    if isinstance(payload, str):
        return b""
    choices = payload.get("choices") or [{}]
    return str((choices[0].get("delta") or {}).get("content") or "").encode()


def plain_error(error: GatewayError) -> dict[str, Any]:
    return {"plain_error": error.message}


DOOR = FrontDoor("plain", ("/test/",), router, plain_error)
