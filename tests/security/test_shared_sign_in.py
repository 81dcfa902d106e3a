"""S2 (audit 2026-11-27, medium): a limited key controlled the gateway-wide sign-in of a shared OAuth server.

Without `per_key`, a server has one sign-in that every key's calls act as. The attacker holds a key the keys file
lets use that server, and nothing more: it opens the sign-in link and consents as an account it controls, so that
every other key's calls (notes written, issues filed) act as that account; or it signs the server out for everyone.
The audit saw carol's `whoami` answer for alice and the operator, and her sign-out take the tools away from all.
It also saw the other side of a legitimate new sign-in: the callback said "signed in" while the live connection
still acted as the identity before.

Over real HTTP to a running gateway, against the real authorization server and protected MCP server of
tests/support/oauth_servers.py (a person's browser played by httpx): a limited key gets a 403 that says who may,
at the start and at sign-out, and nothing changes; the operator's new sign-in answers as the new identity from
the first call after its callback, with calls running throughout; a key the keys file gives "sign_in" may."""

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Gateway, running_gateway
from tests.support.fake_upstream import FakeUpstream
from tests.support.oauth_servers import OAuthPair
from tests.test_sign_in import Person, wait_state

OPERATOR, CAROL, DAVE = "sk-operator-0a1b2c", "sk-carol-limited-3d4e", "sk-dave-signs-in-5f6a"
JSON = {"Content-Type": "application/json"}


@pytest.fixture
def pair() -> Iterator[OAuthPair]:
    with OAuthPair.start() as started:
        yield started


@contextmanager
def shared_gateway(tmp: Path, upstream: FakeUpstream, pair: OAuthPair) -> Iterator[Gateway]:
    """`protected` shared (no per_key); the operator's key; carol may use it, dave may use it and sign it in."""
    keys = tmp / "keys.json"
    keys.write_text(json.dumps({"keys": {CAROL: {"servers": ["protected"], "name": "carol"},
                                         DAVE: {"servers": ["protected"], "sign_in": ["protected"], "name": "dave"}}}))
    server = {"url": pair.mcp_server.mcp_url, "oauth": True}
    with running_gateway(tmp, {"protected": server}, upstream_url=f"{upstream.url}/v1", tool_trace="off",
                         api_keys=OPERATOR, keys_file=keys) as gateway:
        wait_state(gateway, "protected", "needs_sign_in", key=OPERATOR)
        yield gateway


def whoami(gateway: Gateway, key: str) -> str:
    """`protected__whoami` run as a model's call runs (the status page's playground), as `key`."""
    answer = httpx.post(f"{gateway.url}/ui/playground", json={"tool": "protected__whoami"}, timeout=30,
                        headers={"Authorization": f"Bearer {key}"})
    assert answer.status_code == 200, answer.text
    result = json.loads(answer.json()["content"])
    return str(result["data"]["result"]) if result["status"] == "success" else f"failed: {result}"


def sign_in_as(gateway: Gateway, key: str, user: str) -> httpx.Response:
    return Person(gateway, key).sign_in("protected", user=user)


def sign_out(gateway: Gateway, key: str) -> httpx.Response:
    return httpx.post(f"{gateway.url}/ui/servers/protected/sign-out", content="{}", headers=JSON, auth=("", key),
                      timeout=30)


def shown(gateway: Gateway, key: str) -> dict[str, Any]:
    """The server as `key`'s status page reads it."""
    answer = httpx.get(f"{gateway.url}/ui/health", auth=("", key), timeout=30)
    servers: dict[str, Any] = answer.json()["servers"]
    return servers["protected"]


def refused_as_not_allowed(answer: httpx.Response) -> None:
    assert answer.status_code == 403, answer.text
    error = answer.json()["error"]
    assert error["code"] == "sign_in_not_allowed" and error["type"] == "permission_error"
    assert "TOOLBRIDGE_API_KEYS" in error["message"] and '"sign_in"' in error["message"]


def test_a_limited_key_can_neither_sign_the_shared_server_in_as_itself_nor_out(
    tmp_path: Path, upstream: FakeUpstream, pair: OAuthPair
) -> None:
    with shared_gateway(tmp_path, upstream, pair) as gateway:
        assert sign_in_as(gateway, OPERATOR, "operator").status_code == 303
        wait_state(gateway, "protected", "ready", key=OPERATOR)
        assert whoami(gateway, CAROL) == "operator"

        carol = Person(gateway, CAROL)
        refused_as_not_allowed(carol.start("protected"))
        assert "toolbridge_sign_in" not in carol.browser.cookies  # nothing was started for her to finish
        refused_as_not_allowed(sign_out(gateway, CAROL))

        provider = pair.authorization_server.provider
        assert provider.authorizations == ["operator"] and len(provider.clients) == 1
        assert wait_state(gateway, "protected", "ready", key=OPERATOR)["signed_in"] is True
        assert [whoami(gateway, key) for key in (OPERATOR, CAROL, DAVE)] == ["operator"] * 3
        # What the status page offers: no Sign in or Sign out to carol; both to the operator and to dave.
        assert shown(gateway, CAROL)["may_sign_in"] is False
        assert shown(gateway, OPERATOR)["may_sign_in"] is True and shown(gateway, DAVE)["may_sign_in"] is True


def test_a_new_sign_in_answers_as_the_new_identity_from_the_first_call_after_its_callback(
    tmp_path: Path, upstream: FakeUpstream, pair: OAuthPair
) -> None:
    with shared_gateway(tmp_path, upstream, pair) as gateway:
        assert sign_in_as(gateway, OPERATOR, "first-person").status_code == 303
        wait_state(gateway, "protected", "ready", key=OPERATOR)
        assert whoami(gateway, OPERATOR) == "first-person"

        # Calls all along, from another client, each noted with when it was sent.
        answers: list[tuple[float, str]] = []
        done = threading.Event()

        def calling() -> None:
            while not done.is_set():
                sent = time.monotonic()
                answers.append((sent, whoami(gateway, CAROL)))

        caller = threading.Thread(target=calling)
        caller.start()
        try:
            back = sign_in_as(gateway, OPERATOR, "second-person")
            returned = time.monotonic()
            assert back.status_code == 303 and back.headers["location"] == "/?signed_in=protected"
            assert whoami(gateway, OPERATOR) == "second-person"  # the first call after the callback
            while not any(sent > returned for sent, _ in answers):  # the other client's, sent after it, too
                assert caller.is_alive()
                time.sleep(0.01)
        finally:
            done.set()
            caller.join(timeout=60)
        after = [who for sent, who in answers if sent > returned]
        assert after and set(after) == {"second-person"}, answers
        # The tokens it replaced were revoked: no other replica's connection goes on as the first person.
        provider = pair.authorization_server.provider
        assert {token.subject for token in provider.access_tokens.values()} == {"second-person"}
        assert {token.subject for token in provider.refresh_tokens.values()} == {"second-person"}


def test_a_key_the_keys_file_gives_sign_in_signs_the_shared_server_in_and_out(
    tmp_path: Path, upstream: FakeUpstream, pair: OAuthPair
) -> None:
    with shared_gateway(tmp_path, upstream, pair) as gateway:
        assert sign_in_as(gateway, DAVE, "dave-person").status_code == 303
        assert wait_state(gateway, "protected", "ready", key=OPERATOR)["signed_in"] is True
        assert whoami(gateway, OPERATOR) == "dave-person"
        out = sign_out(gateway, DAVE)
        assert out.status_code == 200 and out.json() == {"server": "protected", "signed_in": False}
        assert wait_state(gateway, "protected", "needs_sign_in", key=OPERATOR)["signed_in"] is False
        assert whoami(gateway, CAROL).startswith("failed")
