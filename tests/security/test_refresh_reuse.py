"""Issue 43, "OAuth on the second day": two replicas sharing one sign-in must never both spend its refresh token.

Refresh tokens rotate: each works once. An authorization server that follows RFC 9700 takes a spent one presented
again for a stolen one and revokes the whole grant, and every key is signed out within seconds; Outline did this
to LibreChat every hour of active use (danny-avila/LibreChat#14583). The attacker here is the race itself: two
replicas whose tokens fall due together each refresh, the slower one with the refresh token the faster one just
spent. (The gateway once looked in the vault for newer tokens before refreshing; both looked before either stored.)

Over real HTTP: two gateways on one real redis-server, the real authorization server and protected MCP server of
tests/support/oauth_servers.py with 2 s tokens and revocation on reuse, chats through the official openai SDK.
The authorization server holds each refresh a moment for another to arrive (`hold_refreshes`), so that a second
refresh of the same token, if the gateways send one, meets the first every time. The short storm is
bench/refresh_storm.py's minute, in seconds."""

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import app.mcp.pauses
from tests.conftest import Gateway
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn
from tests.support.oauth_servers import OAuthPair
from tests.support.replica_services import RedisServer
from tests.support.servers import ServerThread
from tests.test_sign_in import wait_state
from tests.test_sign_in_lifecycle import signed_in, two_replicas, wait_past_expiry

STORM_SECONDS = 8.0


def whoami_model(body: dict[str, Any]) -> Turn:
    """Calls `whoami` and answers with what it said: any number of chats at once, unscripted."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return Turn(content=str(last["content"]))
    return Turn(calls=[Call("protected__whoami", {})])


@contextmanager
def whoami_upstream() -> Iterator[FakeUpstream]:
    fake = FakeUpstream(default=whoami_model, record=False)
    with ServerThread(fake.app) as thread:
        fake.url = thread.url  # type: ignore[attr-defined]
        yield fake


def whoami(gateway: Gateway) -> str:
    """One chat; the identity its `whoami` call answered with, or why it failed."""
    reply = gateway.client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "who?"}])
    result = json.loads(reply.choices[0].message.content or "{}")
    return str(result["data"]["result"]) if result.get("status") == "success" else f"failed: {result}"


def at_once(*gateways: Gateway) -> list[str]:
    """One chat on each gateway, sent together."""
    start, answers = threading.Barrier(len(gateways)), [""] * len(gateways)

    def chat(index: int) -> None:
        start.wait(timeout=30)
        answers[index] = whoami(gateways[index])

    threads = [threading.Thread(target=chat, args=(index,)) for index in range(len(gateways))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return answers


@pytest.fixture
def quick_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app.mcp.pauses, "SIGN_IN_LOOK", 0.2)  # replica B takes up A's sign-in in 0.2 s, not 15


def still_signed_in(pair: OAuthPair, *gateways: Gateway) -> None:
    provider = pair.authorization_server.provider
    assert provider.reuses == 0 and provider.authorizations == ["alice"]
    for gateway in gateways:
        assert wait_state(gateway, "protected", "ready")["signed_in"] is True


@pytest.mark.usefixtures("quick_looks")
def test_two_replicas_whose_tokens_fall_due_together_spend_the_refresh_token_once(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with (OAuthPair.start(access_token_lifetime=2, reuse_revokes_grant=True, hold_refreshes=2.0) as pair,
          whoami_upstream() as upstream, two_replicas(pair, tmp_path, upstream, redis_server) as (a, b, _)):
        signed_in(a)
        wait_state(b, "protected", "ready")
        for _ in range(2):
            wait_past_expiry(pair)
            assert at_once(a, b) == ["alice", "alice"]
        still_signed_in(pair, a, b)
        assert pair.authorization_server.provider.refreshes >= 2


@pytest.mark.usefixtures("quick_looks")
def test_a_storm_of_expiring_tokens_on_two_replicas_makes_no_reuse_and_fails_no_call(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with (OAuthPair.start(access_token_lifetime=2, reuse_revokes_grant=True, hold_refreshes=0.5) as pair,
          whoami_upstream() as upstream, two_replicas(pair, tmp_path, upstream, redis_server) as (a, b, _)):
        signed_in(a)
        wait_state(b, "protected", "ready")
        answers: list[str] = []
        until = time.monotonic() + STORM_SECONDS

        def chatting(gateway: Gateway) -> None:
            while time.monotonic() < until:
                answers.append(whoami(gateway))

        threads = [threading.Thread(target=chatting, args=(gateway,)) for gateway in (a, a, b, b)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=STORM_SECONDS + 120)
        provider = pair.authorization_server.provider
        failed = [answer for answer in answers if answer != "alice"]
        print(f"{len(answers)} chats, {provider.refreshes} refreshes, {provider.reuses} reuses, {len(failed)} failed")
        assert answers and failed == []
        assert provider.refreshes >= STORM_SECONDS / 2 - 1  # the tokens did expire, again and again
        still_signed_in(pair, a, b)
