"""Every protected route without the key (issue 9's audit): 1,000 requests, every route of every door in several
spellings, with every wrong way to send a key; and a body sent without the key is never read or checked."""

import json
from pathlib import Path

import httpx

from tests.security.conftest import gateway_at
from tests.support.fake_upstream import FakeUpstream
from tests.support.raw_http import chat_head, raw, send_head

ASK = [{"role": "user", "content": "hi"}]


PROTECTED = [("GET", "/tools"), ("GET", "/prompts"), ("GET", "/resources"), ("GET", "/v1/models"),
             ("POST", "/v1/chat/completions"), ("GET", "/v1/models/x"),
             ("POST", "/v1/embeddings"), ("GET", "/metrics"), ("GET", "/openapi.json"), ("DELETE", "/v1/files/f"),
             ("GET", "/ui/calls"), ("GET", "/ui/events"), ("POST", "/ui/playground"), ("POST", "/ui/servers/x/restart"),
             ("GET", "/ui/waiting"), ("POST", "/ui/waiting/x"),
             ("POST", "/v1/responses"), ("POST", "/v1/messages"), ("POST", "/api/chat"), ("GET", "/api/tags")]
PATH_FORMS = ["{path}", "{path}/", "/{path}", "{upper}", "{path}?api_key=k1"]
WRONG_CREDENTIALS = [{}, {"Authorization": "Bearer"}, {"Authorization": "Bearer wrong"},
                     {"Authorization": "Bearer K1"}, {"Authorization": "Bearer k1x"}, {"Authorization": "Basic azE="},
                     {"Authorization": "Token k1"}, {"Authorization": "k1"}, {"X-Api-Key": "k1x"},
                     {"Cookie": "api_key=k1"}]


def test_no_protected_route_is_reached_without_the_key(tmp_path: Path, upstream: FakeUpstream) -> None:
    """1,000 requests: every protected route (each door's too), in several spellings, with every wrong way to send
    a key (x-api-key is a right one: Anthropic's clients send it)."""
    upstream.script()
    body = json.dumps({"model": "m", "messages": ASK}).encode()
    with gateway_at(tmp_path, f"{upstream.url}/v1", api_keys="k1") as gateway:
        cases = [(method, form.format(path=path, upper=path.upper()), credentials)
                 for method, path in PROTECTED for form in PATH_FORMS for credentials in WRONG_CREDENTIALS]
        answered = {
            (method, path, json.dumps(credentials)): raw(
                gateway, method, path, {"Content-Type": "application/json", **credentials},
                body if method == "POST" else b"",
            )[0]
            for method, path, credentials in cases
        }
        assert raw(gateway, "GET", "/v1/models", {"Authorization": "Bearer k1"})[0] == 200
    assert len(answered) == len(PROTECTED) * len(PATH_FORMS) * len(WRONG_CREDENTIALS) == 1000
    assert {case: status for case, status in answered.items() if status != 401} == {}
    assert upstream.paths == ["/v1/models"]


def test_without_a_key_no_body_is_read_or_validated(tmp_path: Path, upstream: FakeUpstream) -> None:
    upstream.script()
    with gateway_at(tmp_path, f"{upstream.url}/v1", api_keys="k1") as gateway:
        status, body = send_head(gateway.thread.port, chat_head(gateway.thread.port, 40_000_000))
        assert (status, body["error"]["code"]) == (401, "invalid_api_key")
        invalid = httpx.post(f"{gateway.url}/v1/chat/completions", content=b"{not json",
                             headers={"Content-Type": "application/json"})
        assert invalid.status_code == 401
        assert "JSON" not in invalid.json()["error"]["message"]
    assert upstream.requests == []
