"""A chat request's body, read once: parsed by orjson, checked by the wire model, forwarded as parsed.

FastAPI would parse the body with the standard library, build the pydantic model, and the route would
dump it back into a dict for the upstream: three passes over a body that can hold 36 tool definitions
and a long history. Here the dict the client sent is what goes on; the model only checks the fields the
gateway reads. Failures are the same RequestValidationError FastAPI raises, so the messages stay those of
app/main.py's handler.

What one request may carry is checked on the way (below), and a body past OFF_LOOP_BYTES is read in a worker
thread (app/api/doors.py), so that no body under TOOLBRIDGE_MAX_BODY_BYTES holds the event loop.

What one request may carry, so that no body under TOOLBRIDGE_MAX_BODY_BYTES holds the event loop: its JSON
values, counted on its bytes before it is parsed; then its messages, their content parts and its tools, counted
before anything reads them one by one. Past a bound, a 400 names what and how much (audit S5: 200,000 messages
in 8 MB held /health 8 to 11 s on every door).

Parsing holds the GIL from the first byte to the last (orjson: 50-180 ns a value, 0.5 s for 50 MB of small
messages), in a worker thread as much as on the event loop, hence the values are counted first: at the bound,
a parse takes about 40 ms. The gateway then reads each message, part and tool several times on the event loop
(memory's keys, the tool budget, the upstream's body), a few microseconds each: the other bounds keep that to a
few milliseconds. None is near what a model's context holds: 10,000 messages fill a 128k context at 12 tokens
each, and OpenAI's own API takes 128 tools.

The values counted are a close upper bound on the array items and the values of object fields (keys are not
counted): each but the first of a container follows a comma, and the first follows the container's opening
bracket, so the commas and opening brackets outside strings, plus the body itself, bound them. Strings are told
apart exactly: once every escaped backslash and escaped quote is taken out, each quote left opens or closes one.
"""

import json
import math
import sys
from collections.abc import Iterator
from email.message import Message
from typing import Any, NoReturn, cast

import orjson
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from app.openai.errors import InvalidRequest
from app.openai.schemas import ChatCompletionRequest
from app.openai.wire import ChatBody, JSONObject, JSONValue

# Past this, a body is read in a worker thread: below it, parsing and checking it takes a few milliseconds.
OFF_LOOP_BYTES = 256 * 1024

# Every digit as "0", every other byte as " ": then a run of 19 digits is one fast `find` (a regular
# expression took 250 µs on a 30 KB body, more than parsing it).
_DIGITS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_LONG_RUN = b"0" * 19


def parse_chat_body(body: bytes, content_type: str | None) -> tuple[ChatBody, ChatCompletionRequest]:
    """The body as sent, and the checked model of it.

    Raises:
        RequestValidationError: not JSON, or fields the gateway reads are malformed.
        InvalidRequest: not sent as JSON, or holding numbers JSON cannot carry (NaN, Infinity) or Python cannot
            read (an integer of more than 4,300 digits), or more than a request carries (`check_values`).
    """
    parsed = parse_json(body, content_type)
    request = checked_chat_body(parsed)
    # ChatCompletionRequest checked every field a ChatBody declares that the gateway reads (the messages and their
    # roles and content, the tools, stream, stream_options); the rest is the upstream's, sent on as it came.
    return cast(ChatBody, parsed), request


def checked_chat_body(body: object, field: str = "messages") -> ChatCompletionRequest:
    """The wire model of a chat body that carries no more than a request may (`field`: what the client's door calls
    the conversation, for the error).

    Raises:
        RequestValidationError: fields the gateway reads are malformed.
        InvalidRequest: more messages, content parts or tools than a request carries (`check_carried`).
    """
    if isinstance(body, dict):
        check_carried(body, field)
    try:
        return ChatCompletionRequest.model_validate(body)
    except ValidationError as exc:
        raise RequestValidationError([{**error, "loc": ("body", *error["loc"])} for error in exc.errors()]) from None


def parse_json(body: bytes, content_type: str | None) -> JSONValue:
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
        parsed: JSONValue = orjson.loads(body)
    except orjson.JSONDecodeError:
        return _parse_leniently(body)  # what orjson refuses and Python reads: NaN, lone surrogates, 1e400
    if _may_hold_long_integer(parsed, body):  # orjson reads integers past 64 bits as floats: a seed would change
        return _parse_leniently(body)
    return parsed


def _may_hold_long_integer(parsed: JSONValue, body: bytes) -> bool:
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


def _parse_leniently(body: bytes) -> JSONValue:
    def refuse(constant: str) -> NoReturn:
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
        parsed: JSONValue = json.loads(body, parse_constant=refuse, parse_float=finite, parse_int=integer)
        return parsed
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


# ---------------------------------------------------------------- what one request may carry

MAX_VALUES = 250_000
MAX_MESSAGES = 10_000
MAX_PARTS = 20_000  # in all the messages: a client may send each message's text as a list of one part
MAX_TOOLS = 2_000
_SLICE = 1 << 20  # each slice's few passes hold the GIL for a few milliseconds; a thread lets the loop in between
_BACKSLASH = 0x5C


def check_values(body: bytes) -> None:
    """Raises InvalidRequest (`too_many_values`) when the body holds more than MAX_VALUES values."""
    if values_past(body, MAX_VALUES) is not None:
        raise InvalidRequest(
            f"The request body holds more than {MAX_VALUES:,} JSON values (array items and object fields); one "
            "request carries at most that many, more than any model's context holds. Send a shorter conversation.",
            code="too_many_values")


def check_carried(chat_body: JSONObject, field: str) -> None:
    """Raises InvalidRequest when a chat body holds more messages, content parts or tools than one request carries;
    `field` is what the client's door calls the conversation ("messages", or the Responses API's "input")."""
    messages = chat_body.get("messages")
    messages = messages if isinstance(messages, list) else []
    tools = chat_body.get("tools")
    parts = sum(len(content) for message in messages
                if isinstance(message, dict) and isinstance(content := message.get("content"), list))
    for count, bound, holds, what, param in (
        (len(messages), MAX_MESSAGES, "The conversation holds", "messages", field),
        (parts, MAX_PARTS, "The conversation's messages hold", "content parts", field),
        (len(tools) if isinstance(tools, list) else 0, MAX_TOOLS, "The request offers", "tools", "tools"),
    ):
        if count > bound:
            raise InvalidRequest(f"{holds} {count:,} {what}; one request carries at most {bound:,}, more than any "
                                 "model's context holds.", param=param, code=f"too_many_{what.split()[-1]}")


def values_past(body: bytes, bound: int) -> int | None:
    """How many values `body` holds (see above) when that is more than `bound`; None when it is not.

    Cheap for every body a client sends: one too short to hold more is not read at all, and one whose commas and
    brackets are few is read three times by C loops. Strings are skipped only in a body whose commas and brackets
    are many (a long paste of code or a table): then slice by slice, stopping once past the bound."""
    if len(body) < bound:
        return None
    if _structure(body) + 1 <= bound:
        return None
    count = 1
    inside = False  # whether the slice begins inside a string
    for piece in _slices(body):
        parts = piece.replace(b"\\\\", b"").replace(b'\\"', b"").split(b'"')
        count += _structure(b"".join(parts[1::2] if inside else parts[0::2]))
        if count > bound:
            return count
        inside ^= len(parts) % 2 == 0  # an odd number of quotes in the slice
    return None


def _structure(data: bytes) -> int:
    """The commas and opening brackets in `data`, counted a slice at a time (each count of 50 MB whole held the
    GIL for 12 ms)."""
    return sum(data.count(mark, start, start + _SLICE) for start in range(0, len(data), _SLICE)
               for mark in (b",", b"[", b"{"))


def _slices(body: bytes) -> Iterator[bytes]:
    """The body in slices of about _SLICE bytes, none ending inside an escape: a run of backslashes and the
    character after it stay in one slice."""
    start = 0
    while start < len(body):
        end = min(start + _SLICE, len(body))
        while end < len(body) and body[end - 1] == _BACKSLASH:
            end += 1
        yield body[start:end]
        start = end
