"""A chat request's body, read once: parsed by orjson, checked by the wire model, forwarded as parsed.

FastAPI would parse the body with the standard library, build the pydantic model, and the route would
dump it back into a dict for the upstream: three passes over a body that can hold 36 tool definitions
and a long history. Here the dict the client sent is what goes on; the model only checks the fields the
gateway reads. Failures are the same RequestValidationError FastAPI raises, so the messages stay those of
app/main.py's handler.

What one request may carry is checked on the way (request_bounds.py), and a body past OFF_LOOP_BYTES is read in a
worker thread (app/api/doors.py), so that no body under TOOLBRIDGE_MAX_BODY_BYTES holds the event loop.
"""

import json
import math
import sys
from email.message import Message
from typing import Any

import orjson
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from app.api.request_bounds import check_carried, check_values
from app.openai.errors import InvalidRequest
from app.openai.schemas import ChatCompletionRequest

# Past this, a body is read in a worker thread: below it, parsing and checking it takes a few milliseconds.
OFF_LOOP_BYTES = 256 * 1024

# Every digit as "0", every other byte as " ": then a run of 19 digits is one fast `find` (a regular
# expression took 250 µs on a 30 KB body, more than parsing it).
_DIGITS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_LONG_RUN = b"0" * 19


def parse_chat_body(body: bytes, content_type: str | None) -> tuple[dict[str, Any], ChatCompletionRequest]:
    """The body as sent, and the checked model of it.

    Raises:
        RequestValidationError: not JSON, or fields the gateway reads are malformed.
        InvalidRequest: not sent as JSON, or holding numbers JSON cannot carry (NaN, Infinity) or Python cannot
            read (an integer of more than 4,300 digits), or more than a request carries (request_bounds.py).
    """
    parsed = parse_json(body, content_type)
    return parsed, checked_chat_body(parsed)


def checked_chat_body(body: Any, field: str = "messages") -> ChatCompletionRequest:
    """The wire model of a chat body that carries no more than a request may (`field`: what the client's door calls
    the conversation, for the error).

    Raises:
        RequestValidationError: fields the gateway reads are malformed.
        InvalidRequest: more messages, content parts or tools than a request carries (request_bounds.py).
    """
    if isinstance(body, dict):
        check_carried(body, field)
    try:
        return ChatCompletionRequest.model_validate(body)
    except ValidationError as exc:
        raise RequestValidationError([{**error, "loc": ("body", *error["loc"])} for error in exc.errors()]) from None


def parse_json(body: bytes, content_type: str | None) -> Any:
    """A request body as JSON: orjson's reading, Python's where orjson's would differ (see parse_chat_body).

    Raises:
        RequestValidationError: empty, or not JSON.
        InvalidRequest: as parse_chat_body's, or more JSON values than a request carries.
    """
    if not body:
        raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}])
    if content_type and not _is_json(content_type):
        raise InvalidRequest("The request body must be JSON: send the header 'Content-Type: application/json'.",
                             code="invalid_content_type")
    check_values(body)
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return _parse_leniently(body)  # what orjson refuses and Python reads: NaN, lone surrogates, 1e400
    if _may_hold_long_integer(parsed, body):  # orjson reads integers past 64 bits as floats: a seed would change
        return _parse_leniently(body)
    return parsed


def _may_hold_long_integer(parsed: Any, body: bytes) -> bool:
    """Whether orjson may have read an integer as a float: it did only if it gave a float past 2**63. Walking
    the values costs little for a chat (a few hundred), but is bounded: past that, the digits are scanned
    (two passes over the body, 0.16 s at 40 MB: the walk spares a chat with one long message that time)."""
    pending, seen = [parsed], 0
    while pending:
        value = pending.pop()
        seen += 1
        if seen > _WALK_LIMIT:
            return body.translate(_DIGITS).find(_LONG_RUN) >= 0
        if isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
        elif isinstance(value, float) and abs(value) >= _INT64:
            return True
    return False


_WALK_LIMIT = 100_000
_INT64 = float(2**63)


def _parse_leniently(body: bytes) -> Any:
    def refuse(constant: str) -> Any:
        raise InvalidRequest("The request holds a number JSON cannot carry (NaN or Infinity).", code="invalid_number")

    def finite(number: str) -> float:
        value = float(number)
        return value if math.isfinite(value) else refuse(number)  # 1e400: no server could read it back

    def integer(number: str) -> int:
        try:
            return int(number)
        except ValueError:  # past Python's limit on an integer's digits (sys.get_int_max_str_digits)
            raise InvalidRequest(
                f"The request holds an integer of {len(number.lstrip('-')):,} digits; at most "
                f"{sys.get_int_max_str_digits():,} are read.", code="invalid_number",
            ) from None

    try:
        return json.loads(body, parse_constant=refuse, parse_float=finite, parse_int=integer)
    except json.JSONDecodeError as exc:
        raise _not_json(exc.pos, exc.msg) from None
    except RecursionError:
        raise _not_json(0, "arrays or objects nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise _not_json(exc.start, str(exc)) from None


def _not_json(position: int, error: str) -> RequestValidationError:
    """FastAPI's own error for a body that is not JSON."""
    return RequestValidationError([{"type": "json_invalid", "loc": ("body", position), "msg": "JSON decode error",
                                    "input": {}, "ctx": {"error": error}}])


def _is_json(content_type: str) -> bool:
    if content_type.startswith("application/json"):
        return True
    message = Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


def with_chat_body_schema(openapi: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI document with the chat body described (FastAPI only knows bodies it parses itself):
    clients, docs and the fuzz test (tests/security/test_openapi_fuzz.py) read it."""
    body = ChatCompletionRequest.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas = openapi.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(body.pop("$defs", {}))
    schemas["ChatCompletionRequest"] = body
    openapi["paths"]["/v1/chat/completions"]["post"]["requestBody"] = {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ChatCompletionRequest"}}},
    }
    return openapi
