"""A chat body is read once, by orjson, and what goes to the upstream is what the client sent."""

import json

import pytest
from fastapi.exceptions import RequestValidationError

from app.api.chat_body import parse_chat_body
from app.openai.errors import InvalidRequest
from app.upstream.client import _json_bytes

MESSAGES = '"messages": [{"role": "user", "content": "hi"}]'


@pytest.mark.parametrize(
    "body",
    [
        f'{{"model": "m", {MESSAGES}, "seed": {2**70 + 1}}}',  # past 64 bits: orjson alone would make it a float
        f'{{"model": "m", {MESSAGES}, "seed": 18446744073709551615, "n": -9223372036854775808}}',
        f'{{"model": "m", {MESSAGES}, "temperature": 0.1000000000000000055511151231257827, "x": 1e300}}',
        f'{{"model": "m", {MESSAGES}, "extra": {{"é": ["\\u00e9", null, true, [], {{}}]}}, "stream": false}}',
        # more values than are walked looking for a float orjson made of an integer: the digits are scanned
        f'{{"model": "m", {MESSAGES}, "extra": [{", ".join(["0"] * 150_000)}], "seed": {2**70 + 1}}}',
    ],
    ids=["past-64-bits", "64-bit-edges", "floats", "unicode", "past-the-walk"],
)
def test_the_body_reaches_the_upstream_as_sent(body: str) -> None:
    sent, request = parse_chat_body(body.encode(), "application/json")
    assert json.loads(_json_bytes(sent)) == json.loads(body)
    assert request.model == "m" and not request.stream


@pytest.mark.parametrize("content_type", [None, "application/json; charset=utf-8", "application/vnd.api+json"])
def test_json_content_types_are_read(content_type: str | None) -> None:
    assert parse_chat_body(f'{{{MESSAGES}}}'.encode(), content_type)[0]["messages"][0]["content"] == "hi"


@pytest.mark.parametrize(
    ("body", "content_type", "code"),
    [
        (f'{{{MESSAGES}, "temperature": NaN}}', "application/json", "invalid_number"),
        (f'{{{MESSAGES}, "temperature": -Infinity}}', "application/json", "invalid_number"),
        (f'{{{MESSAGES}, "temperature": 1e400}}', "application/json", "invalid_number"),  # infinite as a double
        (f'{{{MESSAGES}}}', "text/plain", "invalid_content_type"),
    ],
)
def test_what_json_cannot_carry_is_refused_by_name(body: str, content_type: str, code: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        parse_chat_body(body.encode(), content_type)
    assert refused.value.code == code


def test_a_lone_surrogate_is_read_and_refused_where_the_body_is_encoded() -> None:
    sent, _ = parse_chat_body(b'{"messages": [{"role": "user", "content": "\\ud800"}]}', "application/json")
    with pytest.raises(InvalidRequest) as refused:
        _json_bytes(sent)
    assert refused.value.code == "invalid_unicode"


@pytest.mark.parametrize(
    ("body", "kind", "where"),
    [
        (b"", "missing", ("body",)),
        (b'{"messages": [', "json_invalid", ("body", 14)),
        (b"[" * 5000 + b"]" * 5000, "json_invalid", ("body", 0)),
        (b'{"messages": []}', "too_short", ("body", "messages")),
        (b'{"messages": [{"role": 5}]}', "string_type", ("body", "messages", 0, "role")),
    ],
)
def test_malformed_bodies_fail_as_fastapi_would_say(body: bytes, kind: str, where: tuple) -> None:
    with pytest.raises(RequestValidationError) as failed:
        parse_chat_body(body, "application/json")
    error = failed.value.errors()[0]
    assert (error["type"], tuple(error["loc"])) == (kind, where)
