"""The Responses API's door (`POST /v1/responses`): its request made a chat body, the answer spelled as a response.

The request's translation is in app/doors/responses/request.py, the answer's spelling in responses_answer.py,
and the stored responses (`previous_response_id`, GET, DELETE) in responses_store.py. Every other path under
`/v1/responses` is answered here with what the gateway serves, never passed through to the upstream, whose
Responses API would answer without the gateway's tools and know none of its responses.
"""

from collections.abc import Mapping

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.api.deps import OwnerDep
from app.api.doors import answer, read_json_object, send_stream, send_whole
from app.chat import MemoryStores, answer_parts
from app.doors.door import FrontDoor, openai_error
from app.doors.responses.answer import ResponseWriter, response_events, whole_response
from app.doors.responses.request import read_request
from app.doors.responses.store import ResponseNotFound, StoredResponses
from app.doors.responses.wire import Deleted, Event
from app.doors.responses.wire import Response as ResponseObject
from app.openai.errors import InvalidRequest, MethodNotAllowed
from app.openai.wire import Message
from app.state import StateStore

RESPONSES_PATH = "/v1/responses"
router = APIRouter()
_SERVED = "POST /v1/responses, GET and DELETE /v1/responses/{id}"


@router.post("/v1/responses")
async def create_response(raw: Request, owner: OwnerDep) -> Response:
    """The chat service's answer as a response: streamed as the API's events, or whole."""
    request = await read_json_object(raw, read_request)
    stored = StoredResponses(_store(raw), owner)
    chain: list[str] = []
    history: list[Message] = []
    if request.previous_response_id is not None:
        most = raw.state.settings.server.max_body_bytes
        chain, history = await stored.conversation(request.previous_response_id, most)
    reply, person = await answer(raw, DOOR, {**request.chat_body, "messages": request.chat_messages(history)})

    async def keep(response: ResponseObject, message: Message) -> None:
        if request.store:
            await stored.keep(response, chain, [*request.input_messages, message])

    writer = ResponseWriter(reply.model, request.echo, show_mcp_calls=reply.trace != "off",
                            namespaced=request.namespaced, summary=request.summary)
    parts = answer_parts(reply.events, trace=reply.trace, person=person, notice=reply.notice)
    if request.stream:
        return send_stream(raw, response_events(parts, writer, keep), encode=_server_sent, cut_off=writer.cut_off)
    return await send_whole(raw, whole_response(parts, writer, keep))


@router.get("/v1/responses/{response_id}")
async def get_response(raw: Request, response_id: str, owner: OwnerDep) -> Mapping[str, object]:
    """A stored response, as it was answered (streaming it again is not served)."""
    if raw.query_params.get("stream") in ("true", "1"):
        raise InvalidRequest("Streaming a stored response again is not served; GET it without `stream`.",
                             param="stream")
    return await StoredResponses(_store(raw), owner).response(response_id)


@router.delete("/v1/responses/{response_id}")
async def delete_response(raw: Request, response_id: str, owner: OwnerDep) -> Mapping[str, object]:
    await StoredResponses(_store(raw), owner).delete(response_id)
    deleted: Deleted = {"id": response_id, "object": "response.deleted", "deleted": True}
    return deleted


@router.api_route("/v1/responses", methods=["GET", "PUT", "PATCH", "DELETE"], include_in_schema=False)
async def responses_other_methods(raw: Request) -> Response:
    raise MethodNotAllowed(raw.method, raw.url.path, "POST")


@router.api_route("/v1/responses/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                  include_in_schema=False)
async def responses_not_served(raw: Request) -> Response:
    """Input items, cancelling, compacting, counting tokens: not served, said rather than passed through."""
    raise ResponseNotFound(f"{raw.method} {raw.url.path} is not served by this gateway's Responses API, which "
                           f"serves {_SERVED}.")


def _store(raw: Request) -> StateStore | None:
    """Where responses are kept: memory's store, else this process's (TOOLBRIDGE_STATE_URL=none)."""
    memory: MemoryStores | None = getattr(raw.state, "memory", None)
    if memory is None:
        return None
    return memory.turns if memory.turns is not None else memory.pending


def _server_sent(event: Event) -> bytes:
    """One SSE event named by its type, as the API sends them (sse-starlette sends bytes as they are)."""
    kind: str = event["type"]
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"


DOOR = FrontDoor("responses", (RESPONSES_PATH,), router, openai_error, conversation="input")
