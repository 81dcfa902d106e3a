"""`"oauth": {"per_key": true}`: each key of a shared gateway signs in as itself, through a running gateway, over
real HTTP, against the real authorization server and protected MCP server (tests/support/oauth_servers.py), two
people at the consent page as themselves ("alice", "bob"). Each key sees the server waiting for its own sign-in,
gets the tools only after it, acts as itself, signs out alone, and keeps its sign-in through a restart."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Gateway, running_gateway, wait_for_health
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn
from tests.support.oauth_servers import OAuthPair
from tests.test_sign_in import Person

ALICE, BOB = "sk-alice-per-key", "sk-bob-per-key"
DEADLINE = 30.0


def keys_file(path: Path) -> Path:
    path.write_text(json.dumps({"keys": {ALICE: {"servers": ["protected"], "name": "alice"},
                                         BOB: {"servers": ["protected"], "name": "bob"}}}))
    return path


def start(tmp: Path, upstream: FakeUpstream, pair: OAuthPair) -> Any:
    server = {"url": pair.mcp_server.mcp_url, "oauth": {"per_key": True}}
    return running_gateway(tmp, {"protected": server}, upstream_url=f"{upstream.url}/v1", tool_trace="off",
                           keys_file=keys_file(tmp / "keys.json"))


@pytest.fixture
def pair() -> Iterator[OAuthPair]:
    with OAuthPair.start() as started:
        yield started


def state(gateway: Gateway, key: str) -> dict[str, Any]:
    """The server as this key's status page shows it."""
    answer = httpx.get(f"{gateway.url}/ui/health", auth=("", key), timeout=30)
    assert answer.status_code == 200, answer.text
    servers: dict[str, Any] = answer.json()["servers"]
    return servers["protected"]


def wait_state(gateway: Gateway, key: str, wanted: str) -> dict[str, Any]:
    body = wait_for_health(gateway.url, lambda b: b.get("servers", {}).get("protected", {}).get("state") == wanted,
                           timeout=DEADLINE, key=key)
    return body["servers"]["protected"]


def offered(gateway: Gateway, upstream: FakeUpstream, key: str) -> set[str]:
    upstream.script(Turn(content="hello"))
    gateway.client(key).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    return {tool["function"]["name"] for tool in upstream.chat_requests()[0].get("tools") or []}


def answer(gateway: Gateway, upstream: FakeUpstream, key: str) -> str:
    upstream.script(Turn(content="hello"))
    reply = gateway.client(key).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    return reply.choices[0].message.content or ""


def whoami(gateway: Gateway, upstream: FakeUpstream, key: str) -> str:
    upstream.script(Turn(calls=[Call("protected__whoami", {})]), Turn(content="done"))
    gateway.client(key).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "who am I?"}])
    result = json.loads(upstream.chat_requests()[1]["messages"][-1]["content"])
    assert result["status"] == "success", result
    return str(result["data"]["result"])


def test_each_key_signs_in_as_itself_and_signs_out_alone(
    tmp_path: Path, upstream: FakeUpstream, pair: OAuthPair
) -> None:
    with start(tmp_path, upstream, pair) as gateway:
        for key in (ALICE, BOB):
            waiting = wait_state(gateway, key, "needs_sign_in")
            assert waiting["signed_in"] is False and waiting["tools"] == 0
            assert offered(gateway, upstream, key) == set()

        assert Person(gateway, ALICE).sign_in("protected", user="alice").status_code == 303
        assert wait_state(gateway, ALICE, "ready")["signed_in"] is True
        assert state(gateway, BOB)["state"] == "needs_sign_in"  # alice's sign-in is hers alone
        assert offered(gateway, upstream, ALICE) == {"protected__whoami", "protected__echo"}
        assert offered(gateway, upstream, BOB) == set()
        assert answer(gateway, upstream, BOB).endswith(f"sign in: {gateway.url}/ui/servers/protected/sign-in")
        assert "sign in" not in answer(gateway, upstream, ALICE)  # hers is done: no link, the tools instead
        assert whoami(gateway, upstream, ALICE) == "alice"

        assert Person(gateway, BOB).sign_in("protected", user="bob").status_code == 303
        assert wait_state(gateway, BOB, "ready")["tools"] == 2
        assert (whoami(gateway, upstream, BOB), whoami(gateway, upstream, ALICE)) == ("bob", "alice")

        signed_out = httpx.post(f"{gateway.url}/ui/servers/protected/sign-out", auth=("", ALICE), json={},
                                timeout=30)
        assert signed_out.status_code == 200, signed_out.text
        assert wait_state(gateway, ALICE, "needs_sign_in")["signed_in"] is False
        assert state(gateway, BOB)["state"] == "ready" and whoami(gateway, upstream, BOB) == "bob"
        assert offered(gateway, upstream, ALICE) == set()
    authorizations = pair.authorization_server.provider.authorizations
    assert authorizations == ["alice", "bob"]


def test_the_sign_ins_of_keys_outlast_a_restart(tmp_path: Path, upstream: FakeUpstream, pair: OAuthPair) -> None:
    with start(tmp_path, upstream, pair) as gateway:
        wait_state(gateway, ALICE, "needs_sign_in")
        Person(gateway, ALICE).sign_in("protected", user="alice")
        wait_state(gateway, ALICE, "ready")
    with start(tmp_path, upstream, pair) as gateway:
        assert wait_state(gateway, ALICE, "ready")["signed_in"] is True
        assert whoami(gateway, upstream, ALICE) == "alice"
        assert state(gateway, BOB)["state"] == "needs_sign_in"
    assert pair.authorization_server.provider.authorizations == ["alice"]
    assert ALICE.encode() not in (tmp_path / "state.tokens.db").read_bytes()  # a key's digest names its sign-in
