"""One server's sign-in kept in the token vault (`app/mcp/oauth_storage.py`), driven by the mcp SDK's own OAuth
client against the real authorization server and protected MCP server of tests/support/oauth_servers.py: a
sign-in whose tokens rest encrypted, a restart (a new vault and provider over the same file, or another replica
over the same Redis) that refreshes an expired token instead of signing in again, sign-out, a changed key, and what
the vault holds beside a provider's tokens (the same, refreshed elsewhere, another sign-in's, none)."""

import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import anyio
import pytest
from cryptography.fernet import Fernet
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import OAuthClientMetadata, OAuthMetadata, OAuthToken

from app.mcp.oauth_storage import VaultTokenStorage
from app.state import MemoryVaultBackend, Vault, open_vault
from app.state.vault_redis import PREFIX
from tests.mcp.test_oauth_servers import TIMEOUT, Browser, connected, oauth, wait_past_expiry, whoami
from tests.support.oauth_servers import OAuthPair
from tests.support.replica_services import RedisServer

pytestmark = pytest.mark.anyio
OpenVault = Callable[[], AbstractAsyncContextManager[Vault]]


@pytest.fixture(params=["sqlite", "redis"])
def vaults(request: pytest.FixtureRequest, tmp_path: Path) -> OpenVault:
    """Opens the vault as a gateway starting (again, or as another replica) would."""
    if request.param == "sqlite":
        return lambda: open_vault(f"sqlite:///{tmp_path / 'state.db'}")
    server: RedisServer = request.getfixturevalue("redis_server")
    server.client().flushdb()
    key = Fernet.generate_key().decode()
    return lambda: open_vault(server.url, key)


def at_rest(vault: Vault, tmp_path: Path, redis_server: RedisServer | None) -> bytes:
    """Every byte the vault keeps outside this process: the SQLite directory's files, or Redis's values."""
    if vault.kind == "sqlite":
        return b"".join(path.read_bytes() for path in tmp_path.iterdir() if path.is_file())
    assert redis_server is not None
    client = redis_server.client()
    return b"".join(client.get(key) or b"" for key in client.keys(PREFIX + "*"))


async def signed_in(pair: OAuthPair, vault: Vault, browser: Browser) -> VaultTokenStorage:
    storage = VaultTokenStorage(vault, "protected")
    provider = oauth(pair, storage, browser)
    await storage.attach(provider)
    async with connected(pair, provider) as client:
        assert await whoami(client) == "alice"
    await wait_past_expiry(provider)
    pair.authorization_server.provider.expire_access_tokens()  # the server's whole-second clock, too
    return storage


async def test_after_a_restart_an_expired_token_is_refreshed_without_a_new_sign_in(
    vaults: OpenVault, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with OAuthPair.start(access_token_lifetime=2) as pair, anyio.fail_after(TIMEOUT):
        server = pair.authorization_server.provider
        browser = Browser()
        async with vaults() as vault:
            first = await signed_in(pair, vault, browser)
            record = await vault.get(first.name)
            assert record is not None and set(record) == {"tokens", "client_info", "metadata", "expires_at"}
            tokens = record["tokens"]
            assert tokens["access_token"] and tokens["refresh_token"] in server.refresh_tokens
            assert tokens["access_token"].encode() not in at_rest(vault, tmp_path, _redis(request))
            assert tokens["refresh_token"].encode() not in at_rest(vault, tmp_path, _redis(request))
            assert record["client_info"]["client_secret"].encode() not in at_rest(vault, tmp_path, _redis(request))

        refreshes = server.refreshes
        async with vaults() as vault:  # the gateway restarted, or another replica
            storage = VaultTokenStorage(vault, "protected")
            provider = oauth(pair, storage, browser)
            await storage.attach(provider)
            assert provider.context.oauth_metadata is not None
            assert str(provider.context.oauth_metadata.token_endpoint).endswith("/token")
            assert provider.context.token_expiry_time == pytest.approx(record["expires_at"])
            async with connected(pair, provider) as client:
                assert await whoami(client) == "alice"
            after = await vault.get(storage.name)
        assert len(browser.opened) == 1 and server.refreshes == refreshes + 1 and server.authorizations == ["alice"]
        assert after is not None and after["tokens"]["refresh_token"] != tokens["refresh_token"]  # rotated, kept
        assert after["expires_at"] > record["expires_at"]


async def test_sign_out_forgets_the_tokens_and_keeps_the_registration(vaults: OpenVault) -> None:
    with OAuthPair.start(access_token_lifetime=2) as pair, anyio.fail_after(TIMEOUT):
        server = pair.authorization_server.provider
        browser = Browser()
        async with vaults() as vault:
            storage = await signed_in(pair, vault, browser)
            assert await storage.signed_in()
            await storage.forget()
            assert not await storage.signed_in() and await storage.get_tokens() is None
            record = await vault.get(storage.name)
            assert record is not None and set(record) == {"client_info", "metadata"}

            again = VaultTokenStorage(vault, "protected")
            provider = oauth(pair, again, browser)
            await again.attach(provider)
            async with connected(pair, provider) as client:
                assert await whoami(client) == "alice"
        assert len(browser.opened) == 2 and len(server.clients) == 1  # signed in again, not registered again


async def test_sign_out_also_clears_the_provider_it_is_attached_to(tmp_path: Path) -> None:
    with OAuthPair.start() as pair, anyio.fail_after(TIMEOUT):
        async with open_vault("memory://") as vault:
            storage = VaultTokenStorage(vault, "protected", identity="key-3f2a")
            provider = oauth(pair, storage, Browser())
            await storage.attach(provider)
            async with connected(pair, provider) as client:
                assert await whoami(client) == "alice"
            assert provider.context.current_tokens is not None
            await storage.forget()
            assert provider.context.current_tokens is None and provider.context.token_expiry_time is None
            assert await vault.names("oauth/protected/") == ["oauth/protected/key-3f2a"]


async def test_a_changed_key_means_signing_in_again_not_a_crash(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    with OAuthPair.start(access_token_lifetime=2) as pair, anyio.fail_after(TIMEOUT):
        browser = Browser()
        async with open_vault(url, Fernet.generate_key().decode()) as vault:
            await signed_in(pair, vault, browser)
        async with open_vault(url, Fernet.generate_key().decode()) as vault:
            storage = VaultTokenStorage(vault, "protected")
            assert await storage.get_tokens() is None and await storage.get_client_info() is None
            provider = oauth(pair, storage, browser)
            await storage.attach(provider)
            async with connected(pair, provider) as client:
                assert await whoami(client) == "alice"
            assert await storage.signed_in()
        assert len(browser.opened) == 2


async def test_metadata_from_a_sign_in_the_gateway_ran_itself_is_given_to_the_next_provider() -> None:
    # The gateway's own callback route (the split flow) stores the tokens and the metadata it used.
    metadata = OAuthMetadata.model_validate({
        "issuer": "https://auth.example", "authorization_endpoint": "https://auth.example/authorize",
        "token_endpoint": "https://auth.example/token", "response_types_supported": ["code"],
    })
    async with open_vault("memory://") as vault:
        storage = VaultTokenStorage(vault, "remote")
        await storage.set_metadata(metadata)
        with OAuthPair.start() as pair:
            provider = oauth(pair, storage, None)
            await storage.attach(provider)
        assert provider.context.oauth_metadata == metadata and provider.context.token_expiry_time is None


def _redis(request: pytest.FixtureRequest) -> RedisServer | None:
    return request.getfixturevalue("redis_server") if "redis" in request.node.callspec.id else None




async def test_sync_tells_tokens_refreshed_elsewhere_from_another_sign_in_and_a_sign_out() -> None:
    vault = Vault(MemoryVaultBackend(), Fernet.generate_key())
    mine, elsewhere = VaultTokenStorage(vault, "protected"), VaultTokenStorage(vault, "protected")
    provider = OAuthClientProvider("http://127.0.0.1:9/mcp", OAuthClientMetadata(redirect_uris=None), mine)
    await elsewhere.set_tokens(OAuthToken(access_token="at-1", refresh_token="rt-1", expires_in=400), new_sign_in=True)
    await mine.attach(provider)
    assert (await mine.get_tokens()) is not None and await mine.sync() == "same"
    await elsewhere.set_tokens(OAuthToken(access_token="at-2", refresh_token="rt-2", expires_in=400))  # a refresh
    assert await mine.sync() == "newer" and await mine.sync() == "same"
    assert provider.context.current_tokens is not None and provider.context.current_tokens.access_token == "at-2"
    assert provider.context.token_expiry_time == pytest.approx(time.time() + 340, abs=5)  # due 60 s early
    await elsewhere.set_tokens(OAuthToken(access_token="at-bob", expires_in=400), new_sign_in=True)
    assert await mine.sync() == "replaced" and provider.context.current_tokens.access_token == "at-bob"
    await elsewhere.forget()
    assert await mine.sync() == "gone"
    # What this storage stores, the provider it is attached to acts with at once (a new sign-in on this replica).
    await mine.set_tokens(OAuthToken(access_token="at-new", expires_in=400), new_sign_in=True)
    assert provider.context.current_tokens.access_token == "at-new"
