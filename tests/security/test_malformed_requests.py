"""Malformed chat requests (issue 9's audit, then the fuzzing): NaN, lone surrogates, wrong types in every place,
deep nesting, other methods: each a 400 (or 405) in the OpenAI envelope naming the field, nothing sent upstream."""

import pytest

from tests.conftest import Gateway
from tests.support.fake_upstream import FakeUpstream
from tests.support.raw_http import envelope, raw


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": NaN}', None),
        (b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "top_p": Infinity}', None),
        (b'{"model": "m", "messages": [{"role": "user", "content": "\\ud800"}]}', None),
        (b'{"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}',
         "messages.0.content"),
        (b'{"model": "m", "messages": [{"role": "user", "content": [5]}]}', "messages.0.content"),
        (b'{"model": "m", "messages": [{"role": "user", "content": 5}]}', "messages.0.content"),
        (b'{"model": "m", "messages": [{"role": 5, "content": "hi"}]}', "messages.0.role"),
        (b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", '
         b'"function": "x"}]}', "tools.0.function"),
        (b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}',
         "tools.0"),
        (b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": ["x"]}', "tools.0"),
        (b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": "yes"}', "stream"),
        (b'{"model": 5, "messages": [{"role": "user", "content": "hi"}]}', "model"),
        (b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "x": ' + b"[" * 5000 + b"]" * 5000 + b"}",
         None),
    ],
)
def test_malformed_chat_requests_are_400s(relay: Gateway, upstream: FakeUpstream, body: bytes, param: str) -> None:
    status, _, answer = raw(relay, "POST", "/v1/chat/completions", {"Content-Type": "application/json"}, body)
    assert status == 400, answer
    error = envelope(status, answer)
    assert error["type"] == "invalid_request_error"
    assert error["code"] != "internal_error"
    assert error["param"] == param
    assert upstream.requests == []


def test_other_methods_on_chat_completions_are_a_405_envelope(relay: Gateway, upstream: FakeUpstream) -> None:
    for method in ("GET", "PUT", "DELETE"):
        status, headers, body = raw(relay, method, "/v1/chat/completions")
        assert status == 405
        assert headers["allow"] == "POST"
        assert envelope(status, body)["code"] == "method_not_allowed"
    assert upstream.paths == []
