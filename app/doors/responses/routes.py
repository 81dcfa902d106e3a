"""The Responses API's door (`POST /v1/responses`): its request made a chat body, the answer spelled as a response.

The request's translation is in app/doors/responses/request.py, the answer's spelling in responses_answer.py,
and the stored responses (`previous_response_id`, GET, DELETE) in responses_store.py. Every other path under
`/v1/responses` is answered here with what the gateway serves, never passed through to the upstream, whose
Responses API would answer without the gateway's tools and know none of its responses.
"""

from collections.abc import Mapping

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.api.deps import OwnerDep
from app.api.doors import door_context, serve_chat
from app.doors.door import FrontDoor, openai_error
from app.doors.responses.answer import ResponsesExchange
from app.doors.responses.store import ResponseNotFound, StoredResponses
from app.doors.responses.wire import Deleted
from app.openai.errors import InvalidRequest, MethodNotAllowed

RESPONSES_PATH = "/v1/responses"
router = APIRouter()
_SERVED = "POST /v1/responses, GET and DELETE /v1/responses/{id}"


@router.post("/v1/responses")
async def create_response(raw: Request) -> Response:
    """The chat service's answer as a response: streamed as the API's events, or whole."""
    return await serve_chat(raw, DOOR)


@router.get("/v1/responses/{response_id}")
async def get_response(raw: Request, response_id: str, owner: OwnerDep) -> Mapping[str, object]:
    """A stored response, as it was answered (streaming it again is not served)."""
    if raw.query_params.get("stream") in ("true", "1"):
        raise InvalidRequest("Streaming a stored response again is not served; GET it without `stream`.",
                             param="stream")
    return await StoredResponses(door_context(raw).store, owner).response(response_id)


@router.delete("/v1/responses/{response_id}")
async def delete_response(raw: Request, response_id: str, owner: OwnerDep) -> Mapping[str, object]:
    await StoredResponses(door_context(raw).store, owner).delete(response_id)
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


DOOR = FrontDoor("responses", (RESPONSES_PATH,), router, openai_error, ResponsesExchange.parse, conversation="input")
