"""A sign-in's life after it was given, through running gateways over real HTTP, with the real authorization
server and protected MCP server of tests/support/oauth_servers.py: the access token expires and is refreshed (also
when the authorization server's clock is ahead), a restart keeps the sign-in (and refreshes rather than asks
again), a revoked sign-in leads back to "needs_sign_in" (while running, or while the gateway was down),
sign-out, what a key outside the server's set sees, two replicas on one Redis (a sign-in on one serves both, a
sign-out on one is not undone by the other), a machine to machine grant (client_credentials) and a client
registered beforehand (no dynamic registration, as GitHub).

Expiry is waited for by the clock the tokens carry (bounded), never by a blind sleep."""

import json
import logging
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from cryptography.fernet import Fernet
from mcp.shared.exceptions import MCPDeprecationWarning

import app.mcp.pauses
from app.logging import without_sign_in_tracebacks
from app.main import create_app
from app.state.vault_open import open_vault
from tests.conftest import Gateway, make_settings, running_gateway
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn
from tests.support.oauth_servers import OAuthPair
from tests.support.replica_services import RedisServer
from tests.test_sign_in import Person, state_of, wait_state, whoami_through_the_chat

VAULT_ENTRY = "oauth/protected/gateway"
OPS, ALICE, BOB = "sk-ops-5e1f0a", "sk-alice-a11ce0", "sk-bob-b0b0b0"
JSON = {"Content-Type": "application/json"}


def wait_past_expiry(pair: OAuthPair) -> None:
    """Until every access token the authorization server issued has expired by its own whole-second count (the
    gateway's clock says so a little earlier): computed from the tokens, bounded."""
    tokens = pair.authorization_server.provider.access_tokens.values()
    expiry = max(token.expires_at or 0 for token in tokens)
    assert expiry - time.time() < 5
    time.sleep(max(0.0, expiry + 1 - time.time()) + 0.1)  # the server rejects from expires_at + 1 on


def vault_record(state_url: str, token_key: str | None = None) -> dict[str, Any]:
    """The gateway's vault entry for the server, read as another process would (through the key)."""

    async def read() -> dict[str, Any]:
        async with open_vault(state_url, token_key) as vault:
            return await vault.get(VAULT_ENTRY) or {}

    return anyio.run(read)


def signed_in(gateway: Gateway, key: str | None = None) -> dict[str, Any]:
    wait_state(gateway, "protected", "needs_sign_in", key=key)
    assert Person(gateway, key).sign_in("protected").status_code == 303
    return wait_state(gateway, "protected", "ready", key=key)


@contextmanager
def gateway_for(pair: OAuthPair, tmp: Path, upstream: FakeUpstream, entry: dict[str, Any] | None = None,
                **settings: Any) -> Iterator[Gateway]:
    server = {"url": pair.mcp_server.mcp_url, "oauth": True} | (entry or {})
    with running_gateway(tmp, {"protected": server}, upstream_url=f"{upstream.url}/v1", tool_trace="off",
                         **settings) as gateway:
        yield gateway


@contextmanager
def two_replicas(pair: OAuthPair, tmp: Path, upstream: FakeUpstream,
                 redis: RedisServer) -> Iterator[tuple[Gateway, Gateway, str]]:
    """Two gateways on one Redis with the same token key (required there), and that key. The Redis is the module's:
    emptied first, so that nothing an earlier test's gateways left there (a sign-in's hold among them) counts."""
    redis.client().flushdb()
    token_key = Fernet.generate_key().decode()
    shared = {"state_url": redis.url, "token_key": token_key}
    (tmp / "a").mkdir()
    (tmp / "b").mkdir()
    with gateway_for(pair, tmp / "a", upstream, **shared) as a, gateway_for(pair, tmp / "b", upstream, **shared) as b:
        yield a, b, token_key


def assert_no_token_written(pair: OAuthPair, capsys: pytest.CaptureFixture[str], *others: str) -> None:
    """No token the authorization server issued (nor `others`) in the log, and some were issued."""
    provider = pair.authorization_server.provider
    issued = [*provider.issued_at, *provider.refresh_tokens, *others]
    seen = capsys.readouterr()
    assert issued and [token for token in issued if token in seen.out + seen.err] == []


def sqlite(tmp: Path) -> str:
    return f"sqlite:///{tmp / 'state.db'}"


def test_an_expired_access_token_is_refreshed_without_asking_again(
    tmp_path: Path, upstream: FakeUpstream, capsys: pytest.CaptureFixture[str]
) -> None:
    with OAuthPair.start(access_token_lifetime=2) as pair, gateway_for(pair, tmp_path, upstream) as gateway:
        signed_in(gateway)
        assert "alice" in whoami_through_the_chat(gateway, upstream)
        provider = pair.authorization_server.provider
        before = provider.refreshes
        wait_past_expiry(pair)
        assert "alice" in whoami_through_the_chat(gateway, upstream)
        assert provider.refreshes > before and provider.authorizations == ["alice"]
        assert state_of(gateway, "protected")["signed_in"] is True
    assert_no_token_written(pair, capsys)


def test_an_authorization_server_with_a_fast_clock_still_gets_a_refresh_not_a_stale_token(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    """Its clock half a second ahead: a token the gateway took as valid to the last moment would be refused
    first, and a refused token is a sign-in asked for again. The gateway refreshes early instead."""
    lifetime, ahead = 4, 0.5
    with (OAuthPair.start(access_token_lifetime=lifetime, clock_ahead=ahead) as pair,
          gateway_for(pair, tmp_path, upstream) as gateway):
        signed_in(gateway)
        provider = pair.authorization_server.provider
        issued = max(provider.issued_at.values())
        time.sleep(max(0.0, issued + lifetime - ahead - time.time()) + 0.1)  # refused by the server, by now
        assert "alice" in whoami_through_the_chat(gateway, upstream)
        assert provider.refreshes >= 1 and provider.authorizations == ["alice"]
        assert state_of(gateway, "protected")["signed_in"] is True


def test_a_restarted_gateway_is_ready_without_a_sign_in_and_refreshes(tmp_path: Path, upstream: FakeUpstream) -> None:
    with OAuthPair.start(access_token_lifetime=2) as pair:
        with gateway_for(pair, tmp_path, upstream) as first:
            signed_in(first)
        assert (tmp_path / "state.tokens.db").exists() and (tmp_path / "state.tokens.key").exists()
        provider = pair.authorization_server.provider
        wait_past_expiry(pair)  # the stored access token is stale: the restarted gateway must refresh first
        before = provider.refreshes
        with gateway_for(pair, tmp_path, upstream) as second:
            ready = wait_state(second, "protected", "ready")
            assert ready["signed_in"] is True and ready["tools"] == 2
            assert provider.refreshes > before
            assert "alice" in whoami_through_the_chat(second, upstream)
            wait_past_expiry(pair)
            assert "alice" in whoami_through_the_chat(second, upstream)
        assert provider.authorizations == ["alice"]


def test_a_sign_in_revoked_while_idle_is_found_by_its_refresh_and_a_chat_gets_the_link_once(
    tmp_path: Path, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    with OAuthPair.start(access_token_lifetime=2) as pair, gateway_for(pair, tmp_path, upstream) as gateway:
        signed_in(gateway)
        assert vault_record(sqlite(tmp_path)).get("tokens")
        provider = pair.authorization_server.provider
        provider.revoke_refresh_tokens("alice")
        # No call made: the refresh shortly before expiry is refused, and the server waits for a person.
        waiting = wait_state(gateway, "protected", "needs_sign_in")
        assert waiting["signed_in"] is False and waiting["tools"] == 0
        record = vault_record(sqlite(tmp_path))
        assert "tokens" not in record and "expires_at" not in record and record.get("client_info")
        first = [{"role": "user", "content": "who?"}]
        upstream.script(Turn(content="Signed out, it seems."))
        reply = gateway.client().chat.completions.create(model=MODEL, messages=first).choices[0].message.content
        assert (reply or "").endswith(f"{gateway.url}/ui/servers/protected/sign-in")
        upstream.script(Turn(content="Still."))  # the same chat: the link is not said again
        again = [*first, {"role": "assistant", "content": reply}, {"role": "user", "content": "and now?"}]
        assert gateway.client().chat.completions.create(model=MODEL, messages=again).choices[0].message.content \
            == "Still."
        # What follows is about the new sign-in, not its expiry: a 2 s token could expire between the sign-in and
        # the call on a busy machine (the expiry is the refresh test's).
        provider.access_token_lifetime = 3600
        signed_in(gateway)
        assert "alice" in whoami_through_the_chat(gateway, upstream)
        assert provider.authorizations == ["alice", "alice"] and len(provider.clients) == 1
    # Expected, not errors: nothing at ERROR reaches the gateway's log (app/logging.py drops the SDK's tracebacks).
    logged = [r for r in caplog.records if without_sign_in_tracebacks(r)]
    assert [r.getMessage() for r in logged if r.levelno >= logging.ERROR] == []


def test_a_call_whose_refresh_is_refused_says_the_server_needs_a_sign_in(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    # Tokens of an hour: it is the call that finds the sign-in gone (its token refused, then its refresh).
    with OAuthPair.start() as pair, gateway_for(pair, tmp_path, upstream) as gateway:
        signed_in(gateway)
        provider = pair.authorization_server.provider
        provider.revoke_refresh_tokens("alice")
        provider.expire_access_tokens()
        upstream.script(Turn(calls=[Call("protected__whoami", {})]), Turn(content="no"))
        gateway.client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "who?"}])
        answer = json.loads(upstream.chat_requests()[1]["messages"][-1]["content"])
        assert answer["status"] == "error" and answer["data"]["error"] == "server_unavailable", answer
        assert "needs a person to sign in" in answer["data"]["message"] and "restart" not in answer["data"]["message"]
        assert wait_state(gateway, "protected", "needs_sign_in")["signed_in"] is False
        assert provider.refreshes == 0 and provider.authorizations == ["alice"]


def test_a_sign_in_revoked_while_the_gateway_was_down_is_asked_for_again(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    with OAuthPair.start(access_token_lifetime=2) as pair:
        with gateway_for(pair, tmp_path, upstream) as first:
            signed_in(first)
        pair.authorization_server.provider.revoke_refresh_tokens("alice")
        wait_past_expiry(pair)
        with gateway_for(pair, tmp_path, upstream) as second:
            waiting = wait_state(second, "protected", "needs_sign_in")
            assert waiting["signed_in"] is False and "error" not in waiting
            assert "tokens" not in vault_record(sqlite(tmp_path))
            signed_in(second)
            assert "alice" in whoami_through_the_chat(second, upstream)


def test_sign_out_takes_the_tools_away_until_the_next_sign_in(tmp_path: Path, upstream: FakeUpstream) -> None:
    with OAuthPair.start() as pair, gateway_for(pair, tmp_path, upstream) as gateway:
        signed_in(gateway)
        out = httpx.post(f"{gateway.url}/ui/servers/protected/sign-out", content="{}", headers=JSON, timeout=30)
        assert out.status_code == 200 and out.json() == {"server": "protected", "signed_in": False}
        # Answered once the server waits: the status page reads the servers right after, and was once left showing
        # "restarting" (CI, under load: its read answered before the supervisor ran, and landed after the live
        # update). Here the supervisor usually runs first anyway, so this fails only when the race is lost.
        at_once = httpx.get(f"{gateway.url}/health", timeout=30).json()["servers"]["protected"]
        assert at_once["state"] == "needs_sign_in" and at_once["signed_in"] is False
        assert "tokens" not in vault_record(sqlite(tmp_path))
        upstream.script(Turn(content="nothing to call"))
        gateway.client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "tools?"}])
        offered = [tool["function"]["name"] for tool in upstream.chat_requests()[0].get("tools") or []]
        assert not [name for name in offered if name.startswith("protected__")]
        signed_in(gateway)
        assert "alice" in whoami_through_the_chat(gateway, upstream)


def test_a_key_outside_the_servers_set_can_neither_sign_in_nor_out_nor_see_it(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"keys": {ALICE: {"servers": ["protected"], "sign_in": ["protected"], "name": "alice"},
                                         BOB: {"servers": [], "name": "bob"}}}))
    with OAuthPair.start() as pair, gateway_for(pair, tmp_path, upstream, api_keys=OPS, keys_file=keys) as gateway:
        wait_state(gateway, "protected", "needs_sign_in", key=ALICE)
        assert Person(gateway, BOB).start("protected").status_code == 404
        out = httpx.post(f"{gateway.url}/ui/servers/protected/sign-out", content="{}", headers=JSON,
                         auth=("", BOB), timeout=30)
        assert out.status_code == 404
        for path, credentials in (("/health", {"headers": {"Authorization": f"Bearer {BOB}"}}),
                                  ("/ui/health", {"auth": ("", BOB)})):
            shown = httpx.get(f"{gateway.url}{path}", timeout=30, **credentials)
            assert shown.status_code == 200 and "protected" not in shown.text, shown.text
        assert not pair.authorization_server.provider.clients  # nothing was even registered for Bob
        signed_in(gateway, ALICE)


def test_another_replica_is_ready_without_its_own_sign_in(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    look = 0.2  # so that the test waits on the replica's look in the vault, not on 15 s of it
    monkeypatch.setattr(app.mcp.pauses, "SIGN_IN_LOOK", look)
    with OAuthPair.start() as pair, two_replicas(pair, tmp_path, upstream, redis_server) as (a, b, token_key):
        wait_state(b, "protected", "needs_sign_in")
        signed_in(a)
        signed = time.monotonic()
        ready = wait_state(b, "protected", "ready")
        took = time.monotonic() - signed
        assert ready["signed_in"] is True and took < 5, took
        assert "alice" in whoami_through_the_chat(b, upstream)
        assert pair.authorization_server.provider.authorizations == ["alice"]
        assert vault_record(redis_server.url, token_key).get("tokens")
        print(f"replica B ready {took:.2f} s after A's sign-in (looking every {look} s)")


def test_a_chat_on_the_other_replica_takes_up_the_sign_in_at_once(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Replica B would look in the vault only after an hour: what makes it ready is a chat that mounts the server
    # (the chat asks which servers wait for a sign-in, and each is asked to look now).
    monkeypatch.setattr(app.mcp.pauses, "SIGN_IN_LOOK", 3600.0)
    with OAuthPair.start() as pair, two_replicas(pair, tmp_path, upstream, redis_server) as (a, b, _):
        wait_state(b, "protected", "needs_sign_in")
        signed_in(a)
        assert wait_state(b, "protected", "needs_sign_in")["signed_in"] is False  # B has not looked
        upstream.script(Turn(content="not yet"))
        b.client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
        assert wait_state(b, "protected", "ready")["signed_in"] is True
        assert whoami_through_the_chat(b, upstream) == "alice"
        assert pair.authorization_server.provider.authorizations == ["alice"]


def test_replicas_take_turns_refreshing_one_sign_in(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each refresh token works once (rotated): when the tokens stop working, the replica that asks first refreshes
    and the other takes the tokens it stored, rather than spend the old refresh token (a reuse, which this
    authorization server punishes by revoking the grant) or take the refusal for a sign-in taken back.

    Counted exactly, so no clock may make a refresh here: the tokens live an hour, and what makes them stop working
    is the authorization server refusing them (as one that lost its tokens does). A 2 s token once made this count
    flaky: a replica whose chat came more than 1.5 s after the other's refresh found those tokens due again."""
    monkeypatch.setattr(app.mcp.pauses, "SIGN_IN_LOOK", 0.2)
    with (OAuthPair.start(reuse_revokes_grant=True) as pair,
          two_replicas(pair, tmp_path, upstream, redis_server) as (a, b, token_key)):
        signed_in(a)
        wait_state(b, "protected", "ready")
        provider = pair.authorization_server.provider
        for first, second in ((a, b), (b, a)):
            provider.expire_access_tokens()
            assert "alice" in whoami_through_the_chat(first, upstream)
            assert "alice" in whoami_through_the_chat(second, upstream)
        assert provider.refreshes == 2 and provider.reuses == 0 and provider.authorizations == ["alice"]
        assert state_of(a, "protected")["signed_in"] is True and state_of(b, "protected")["signed_in"] is True
        assert vault_record(redis_server.url, token_key).get("tokens")


def test_a_sign_out_on_one_replica_is_not_undone_by_the_other(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replica B's connection holds the tokens in memory: were they only forgotten in the vault, its next refresh
    would store new ones there and sign everyone in again. Sign-out revokes them at the authorization server."""
    monkeypatch.setattr(app.mcp.pauses, "SIGN_IN_LOOK", 0.2)
    with (OAuthPair.start(access_token_lifetime=2) as pair,
          two_replicas(pair, tmp_path, upstream, redis_server) as (a, b, token_key)):
        signed_in(a)
        wait_state(b, "protected", "ready")
        provider = pair.authorization_server.provider
        out = httpx.post(f"{a.url}/ui/servers/protected/sign-out", content="{}", headers=JSON, timeout=30)
        assert out.status_code == 200
        refreshed, latest = provider.refreshes, max(provider.issued_at, key=provider.issued_at.__getitem__)
        held_until = provider.issued_at[latest] + 2  # when B's access token would have expired
        assert provider.refresh_tokens == {} and latest not in provider.access_tokens  # revoked (RFC 7009)
        upstream.script(Turn(calls=[Call("protected__whoami", {})]), Turn(content="no"))
        b.client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "who?"}])
        assert wait_state(b, "protected", "needs_sign_in")["signed_in"] is False
        time.sleep(max(0.0, held_until - time.time()) + 0.1)  # B would have refreshed by now, had it kept them
        assert wait_state(a, "protected", "needs_sign_in")["signed_in"] is False
        assert "tokens" not in vault_record(redis_server.url, token_key)
        assert provider.refreshes == refreshed  # B took the sign-out, and refreshed nothing back


def test_redis_without_a_token_key_and_an_oauth_server_does_not_start(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, {"protected": {"url": "http://127.0.0.1:9/mcp", "oauth": True}},
                             state_url="redis://127.0.0.1:9/0", token_key=None)
    application = create_app(settings)

    async def start() -> None:
        async with application.router.lifespan_context(application):
            pass

    with pytest.raises(Exception) as refused:
        anyio.run(start)
    assert "TOOLBRIDGE_TOKEN_KEY" in str(refused.value)


def test_client_credentials_connect_with_no_person(
    tmp_path: Path, upstream: FakeUpstream, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "cs-machine-9d8c7b6a5f4e"
    with OAuthPair.start() as pair:
        provider = pair.authorization_server.provider
        provider.preregister("robot", secret, grant_types=["client_credentials"])
        entry = {"oauth": {"grant": "client_credentials", "client_id": "robot", "client_secret": secret}}
        with gateway_for(pair, tmp_path, upstream, entry) as gateway:
            ready = wait_state(gateway, "protected", "ready")
            assert ready["tools"] == 2 and "signed_in" not in ready
            assert "robot" in whoami_through_the_chat(gateway, upstream)
        assert provider.client_credential_grants == 1 and provider.authorizations == []
        assert provider.resources[-1] == pair.mcp_server.mcp_url
        record = vault_record(sqlite(tmp_path))
        assert record["tokens"]["access_token"] in provider.access_tokens
        assert record["metadata"]["issuer"].rstrip("/") == pair.authorization_server.issuer
        stored = (tmp_path / "state.tokens.db").read_bytes()
        assert [t for t in [*provider.access_tokens, secret] if t.encode() in stored] == []
        provider.expire_access_tokens()  # a restarted gateway's token refused: it asks for another, of the same AS
        with warnings.catch_warnings():
            warnings.simplefilter("error", MCPDeprecationWarning)  # the SDK's warning when no issuer is pinned
            with gateway_for(pair, tmp_path, upstream, entry) as gateway:
                wait_state(gateway, "protected", "ready")
                assert "robot" in whoami_through_the_chat(gateway, upstream)
        assert provider.client_credential_grants == 2
    assert_no_token_written(pair, capsys, secret)


def test_client_credentials_with_the_issuer_named_in_mcp_json(tmp_path: Path, upstream: FakeUpstream) -> None:
    # Named, the secret goes to that authorization server from the first connection on (the SDK pins it and says
    # nothing); a wrong one, and no request carries the secret anywhere.
    secret = "cs-machine-issuer-5e6f7a"
    with OAuthPair.start() as pair:
        provider = pair.authorization_server.provider
        provider.preregister("robot", secret, grant_types=["client_credentials"])
        oauth = {"grant": "client_credentials", "client_id": "robot", "client_secret": secret,
                 "issuer": pair.authorization_server.issuer}
        with warnings.catch_warnings():
            warnings.simplefilter("error", MCPDeprecationWarning)
            (tmp_path / "named").mkdir()
            with gateway_for(pair, tmp_path / "named", upstream, {"oauth": oauth}) as gateway:
                wait_state(gateway, "protected", "ready")
                assert "robot" in whoami_through_the_chat(gateway, upstream)
        assert provider.client_credential_grants == 1
        elsewhere = oauth | {"issuer": "http://127.0.0.1:9/not-this-one"}
        (tmp_path / "wrong").mkdir()
        with gateway_for(pair, tmp_path / "wrong", upstream, {"oauth": elsewhere}) as gateway:
            assert "error" in wait_state(gateway, "protected", "failed")
        assert provider.client_credential_grants == 1


def test_a_preregistered_client_signs_in_without_registering(tmp_path: Path, upstream: FakeUpstream) -> None:
    secret = "cs-github-like-1a2b3c4d"
    with OAuthPair.start(registration=False) as pair:
        entry = {"oauth": {"client_id": "toolbridge-app", "client_secret": secret}}
        with gateway_for(pair, tmp_path, upstream, entry) as gateway:
            provider = pair.authorization_server.provider
            provider.preregister("toolbridge-app", secret, [f"{gateway.url}/oauth/callback"])
            signed_in(gateway)
            assert "alice" in whoami_through_the_chat(gateway, upstream)
        assert list(provider.clients) == ["toolbridge-app"] and provider.authorizations == ["alice"]
