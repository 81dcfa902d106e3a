"""Integers past Python's digit limit (issue 27's N13): a 5,000-digit literal anywhere in the body was a 500; it is a
400 naming the number, streamed or not, and one within the limit is sent on as it is."""

import httpx
import pytest

from tests.conftest import Gateway
from tests.security.conftest import DEADLINE, answer_text
from tests.support.fake_upstream import FakeUpstream, Turn


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("where", ["seed", "nested"])
def test_an_integer_past_pythons_digit_limit_is_a_400(
    plain: Gateway, upstream: FakeUpstream, stream: bool, where: str
) -> None:
    huge = "9" * 5000
    extra = '"seed":' + huge if where == "seed" else '"metadata":{"a":[1,{"b":-' + huge + "}]}"
    body = f'{{"model":"m","messages":[{{"role":"user","content":"hi"}}],"stream":{str(stream).lower()},{extra}}}'
    upstream.script()
    response = httpx.post(f"{plain.url}/v1/chat/completions", content=body, timeout=DEADLINE,
                          headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text[:500]
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "invalid_number"
    assert "integer of 5,000 digits" in error["message"]
    assert upstream.chat_requests() == []


def test_an_integer_within_the_limit_is_sent_on_as_it_is(plain: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="ok"))
    huge = "9" * 4300
    body = '{"model":"m","messages":[{"role":"user","content":"hi"}],"seed":' + huge + "}"
    response = httpx.post(f"{plain.url}/v1/chat/completions", content=body, timeout=DEADLINE,
                          headers={"Content-Type": "application/json"})
    assert answer_text(response) == "ok"
    assert upstream.chat_requests()[-1]["seed"] == int(huge)
