"""A shared sign-in's refresh (`app/mcp/shared_tokens.py`), against the real authorization server and protected MCP
server of tests/support/oauth_servers.py, signed in as the gateway does (`sign_in.start` and `finish`): two
providers on one vault (two replicas) whose tokens fall due together send one refresh, the other taking the tokens
stored; a 401 for tokens the clock calls valid is refreshed once and the call goes on; a refusal ends the sign-in;
an authorization server that cannot be reached ends nothing; the connection's timer takes up a sign-out or a new
sign-in made elsewhere, and never the tokens a refresh of its own is replacing."""

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import pytest
from mcp.shared.auth import OAuthToken

from app.mcp.config import HttpServerConfig
from app.mcp.oauth_storage import VaultTokenStorage
from app.mcp.server_auth import ServerAuth
from app.mcp.shared_tokens import RefreshUnavailable, SharedSignIn, SignInNeeded
from app.mcp.sign_in import finish, start
from app.state import MemoryVaultBackend, Vault
from tests.mcp.test_oauth_servers import TIMEOUT, connected, whoami
from tests.support.oauth_servers import ConsentForm, OAuthPair

pytestmark = pytest.mark.anyio
CALLBACK = "http://127.0.0.1:1/oauth/callback"  # never reached: the test takes the code from the redirect


class Ends:
    """What a provider's `ended` and `replaced` were told (how often, and an event for each)."""

    def __init__(self, provider: SharedSignIn) -> None:
        self.ended = self.replaced = 0
        self.was_ended, self.was_replaced = anyio.Event(), anyio.Event()
        provider.ended, provider.replaced = self._end, self._replace

    def _end(self) -> None:
        self.ended += 1
        self.was_ended.set()

    def _replace(self) -> None:
        self.replaced += 1
        self.was_replaced.set()


async def sign_in(pair: OAuthPair, auth: ServerAuth, user: str = "alice") -> None:
    """The person's two requests, as sign_in.py runs them, with the consent page answered over HTTP."""
    url = await start(auth, CALLBACK, "owner", "browser")
    async with httpx.AsyncClient(timeout=10, follow_redirects=False) as http:
        consent = await http.get(url, follow_redirects=True)
        form = ConsentForm()
        form.feed(consent.text)
        name, value = form.buttons["Allow"]
        back = await http.post(f"{pair.authorization_server.issuer}{form.action}",
                               data=form.fields | {name: value, "user": user})
    query = {key: values[0] for key, values in parse_qs(urlsplit(back.headers["location"]).query).items()}
    await finish(auth.vault, lambda _: auth, query["state"], query["code"], query.get("iss"), None, "browser")


class SlowWrites(MemoryVaultBackend):
    """A vault whose writes wait for `let_write` once `hold_writes` is set (a slow disk, a Redis far away)."""

    def __init__(self) -> None:
        super().__init__()
        self.hold_writes, self.writing, self.let_write = False, anyio.Event(), anyio.Event()

    async def write(self, name: str, value: bytes) -> None:
        if self.hold_writes:
            self.writing.set()
            await self.let_write.wait()
        await super().write(name, value)


@asynccontextmanager
async def replicas(pair: OAuthPair, count: int = 2,
                   backend: MemoryVaultBackend | None = None) -> AsyncIterator[list[SharedSignIn]]:
    """`count` providers of one sign-in on one vault backend, as replicas on one Redis have, initialised."""
    backend = backend or MemoryVaultBackend()
    key = b"L9q3dDz0pQ1yQ0yqv0v8m8Cw3l9o2lHq6s4f3b9kZ8E="
    config = HttpServerConfig(url=pair.mcp_server.mcp_url, oauth=True)
    auths = [ServerAuth("protected", config, Vault(backend, key)) for _ in range(count)]
    await sign_in(pair, auths[0])
    providers = [await auth.provider() for auth in auths]
    assert all(isinstance(provider, SharedSignIn) for provider in providers)
    shared = [provider for provider in providers if isinstance(provider, SharedSignIn)]
    for provider in shared:
        await provider.refresh()  # reads its tokens, as its first request would
    yield shared


def due(*providers: SharedSignIn) -> None:
    for provider in providers:
        provider.context.token_expiry_time = time.time() - 1


def access(provider: SharedSignIn) -> str:
    assert provider.context.current_tokens is not None
    return provider.context.current_tokens.access_token


async def test_two_replicas_due_together_send_one_refresh_and_the_other_takes_its_tokens() -> None:
    # The authorization server holds a refresh a second for another: two sent at once would meet there.
    with OAuthPair.start(reuse_revokes_grant=True, hold_refreshes=1.0) as pair, anyio.fail_after(TIMEOUT):
        async with replicas(pair) as (a, b):
            before = access(a)
            due(a, b)
            async with anyio.create_task_group() as group:
                group.start_soon(a.refresh)
                group.start_soon(b.refresh)
            provider = pair.authorization_server.provider
            assert provider.refreshes == 1 and provider.reuses == 0
            assert access(a) == access(b) != before and access(a) in provider.access_tokens
            due(a)
            await a.refresh()  # the next refresh spends the new refresh token, which works
            assert provider.refreshes == 2 and provider.reuses == 0


async def test_a_401_for_tokens_the_clock_calls_valid_is_refreshed_once_and_the_call_goes_on() -> None:
    with OAuthPair.start() as pair, anyio.fail_after(TIMEOUT):
        async with replicas(pair, 1) as (a,), connected(pair, a) as client:
            assert await whoami(client) == "alice"
            pair.authorization_server.provider.expire_access_tokens()  # as a server that lost its tokens
            assert await whoami(client) == "alice"
            assert pair.authorization_server.provider.refreshes == 1


async def test_a_refused_refresh_ends_the_sign_in() -> None:
    with OAuthPair.start() as pair, anyio.fail_after(TIMEOUT):
        async with replicas(pair, 1) as (a,):
            ends = Ends(a)
            pair.authorization_server.provider.revoke_refresh_tokens("alice")
            due(a)
            with pytest.raises(SignInNeeded):
                await a.refresh()
            assert ends.ended == 1 and a.context.current_tokens is None


async def test_an_authorization_server_that_cannot_be_reached_ends_only_the_attempt() -> None:
    with OAuthPair.start() as pair, anyio.fail_after(TIMEOUT):
        async with replicas(pair, 1) as (a,):
            ends, held = Ends(a), access(a)
            metadata = a.context.oauth_metadata
            assert metadata is not None
            a.context.oauth_metadata = metadata.model_copy(update={"token_endpoint": "http://127.0.0.1:9/token"})
            due(a)
            with pytest.raises(RefreshUnavailable, match="could not be reached"):
                await a.refresh()
            assert ends.ended == 0 and access(a) == held  # kept, for the next attempt
            a.context.oauth_metadata = metadata
            await a.refresh()
            assert access(a) != held and pair.authorization_server.provider.refreshes == 1


async def test_the_connections_timer_takes_up_a_new_sign_in_and_a_sign_out_made_elsewhere() -> None:
    with OAuthPair.start() as pair, anyio.fail_after(TIMEOUT):
        async with replicas(pair, 1) as (a,):
            ends = Ends(a)
            elsewhere = VaultTokenStorage(a.storage.vault, "protected")
            async with anyio.create_task_group() as group:
                group.start_soon(a.keep_fresh, 0.05)
                await elsewhere.set_tokens(OAuthToken(access_token="at-bob", refresh_token="rt-bob", expires_in=3600),
                                           new_sign_in=True)
                await ends.was_replaced.wait()
                assert access(a) == "at-bob"
                await elsewhere.forget()
                await ends.was_ended.wait()
            assert a.context.current_tokens is None  # keep_fresh returned: the sign-in is over


async def test_a_look_while_a_refresh_stores_its_tokens_does_not_take_the_old_ones_back() -> None:
    with OAuthPair.start() as pair, anyio.fail_after(TIMEOUT):
        backend = SlowWrites()
        async with replicas(pair, 1, backend) as (a,):
            due(a)
            backend.hold_writes = True
            async with anyio.create_task_group() as group:
                group.start_soon(a.refresh)
                await backend.writing.wait()  # refreshed at the authorization server; its tokens being stored
                group.start_soon(a._look)
                await anyio.wait_all_tasks_blocked()  # the look has read the vault, or waits to
                backend.let_write.set()
            stored = await a.storage.vault.get(a.storage.name)
            assert stored is not None and access(a) == stored["tokens"]["access_token"]
            assert access(a) in pair.authorization_server.provider.access_tokens
