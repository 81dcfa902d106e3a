"""How the gateway signs in to one HTTP MCP server that asks for OAuth, with the identity the gateway has.

The mcp SDK's `OAuthClientProvider` (an httpx Auth) does the protocol on the connection: it sends the stored
access token, and ours (shared_tokens.py) refreshes it, one replica at a time, keeping the rotated tokens in the
vault (oauth_storage.py). What the SDK cannot do is wait for a person: its browser step is one coroutine from the
authorization URL to the code. So the connection's provider stops there (`SignInNeeded`), and the person's
sign-in runs as two requests of their browser instead (sign_in.py): the server then waits as "needs sign-in",
not failing and retrying, until the callback stores tokens (`take_sign_in`) or another replica did (`check`).
A new sign-in replaces the live connection at once, as a sign-out ends it: a server never acts as the
identity it had before.

A server is taken as asking for OAuth when mcp.json says `oauth`, or when, with no Authorization header
configured, it answered 401 with a Bearer challenge (`challenged`).
"""

from collections.abc import Callable
from typing import Any, NoReturn, Protocol

import anyio
import httpx2
import structlog
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from app import __version__
from app.access import CURRENT_SCOPE
from app.mcp.config import HttpServerConfig, OAuthConfig, ServerConfig
from app.mcp.failures import leaves
from app.mcp.oauth_storage import GATEWAY_IDENTITY, VaultTokenStorage
from app.mcp.shared_tokens import SharedSignIn, revoke_tokens
from app.mcp.shared_tokens import SignInNeeded as SignInNeeded  # where the sign-in's modules have found it
from app.ops.server_health import ServerHealth
from app.state import StateStoreError, Vault

log = structlog.get_logger("toolbridge.mcp")

CLIENT_NAME = "toolbridge"
# Registration needs a redirect URI before the person's browser says which address the gateway has; the
# sign-in registers again with the right one (sign_in.py). Never sent a browser: the flow stops before.
UNUSED_REDIRECT = "http://127.0.0.1/oauth/callback"


class Served(Protocol):  # live.py's `LiveConnection`, which imports far more than a sign-in needs

    @property
    def client(self) -> object | None: ...

    def sign_in_taken_back(self) -> None: ...

    def next_publication(self) -> anyio.Event: ...


def current_identity() -> str:
    """Whose sign-in the request being served uses on a `per_key` server: its key's digest; the gateway's for
    the keys that see everything and when the gateway has no keys."""
    return CURRENT_SCOPE.get().caller or GATEWAY_IDENTITY


class ServerAuth:
    """One server's OAuth, for one identity (the gateway's, or with `per_key` a key's: `for_identity`), and the
    connection it serves (`served_by`): ended when the sign-in is taken back (the refresh token was revoked), so
    that the server waits for the person; replaced when a sign-in stores new tokens. `on_signed_in` is called then
    too (a `per_key` server starts the key's connection)."""

    def __init__(self, name: str, config: HttpServerConfig, vault: Vault | None,
                 identity: str = GATEWAY_IDENTITY) -> None:
        self.name, self.url, self.vault, self.identity, self._config = name, config.url, vault, identity, config
        self.configured: OAuthConfig | None = config.oauth
        self.on_signed_in: Callable[[ServerAuth], None] = lambda _: None
        self._identities: dict[str, ServerAuth] = {}
        self._may_challenge = config.oauth is None and not any(h.lower() == "authorization" for h in config.headers)
        self.challenged = False  # answered 401 with a Bearer challenge, with no oauth in mcp.json
        self.signed_in: bool | None = None  # as last seen in the vault; None: not looked yet
        self.lost: Callable[[], None] = lambda: None
        self.sign_in_lost = False
        self._changed = anyio.Event()
        self._storage: VaultTokenStorage | None = None  # the live connection's provider's
        self._provider: httpx2.Auth | None = None
        self._live: Served | None = None
        self._reconnect: Callable[[], None] = lambda: None
        self._connected = anyio.Event()  # the live connection's next publication, once a sign-in asked for one

    @property
    def settings(self) -> OAuthConfig | None:
        """What this server's OAuth is, or None if it does not use it (as far as the gateway knows yet)."""
        return self.configured or (OAuthConfig.model_validate({}) if self.challenged else None)

    @property
    def person_signs_in(self) -> bool:
        settings = self.settings
        return settings is not None and settings.grant == "authorization_code"

    @property
    def per_key(self) -> bool:
        """Each key signs in as itself: this (the server's) never connects; its identities' do."""
        return self.configured is not None and self.configured.per_key and self.identity == GATEWAY_IDENTITY

    def for_identity(self, identity: str) -> "ServerAuth":
        """A key's own OAuth for a `per_key` server (the same one each time)."""
        if identity not in self._identities:
            child = self._identities[identity] = ServerAuth(self.name, self._config, self.vault, identity)
            child.on_signed_in = self.on_signed_in
        return self._identities[identity]

    def of_caller(self) -> "ServerAuth":
        """The OAuth the request being served uses: its key's on a `per_key` server, else this."""
        return self.for_identity(current_identity()) if self.per_key else self

    def served_by(self, live: Served, restart: Callable[[], None]) -> None:
        """The connection this sign-in acts on (its supervisor's), and how to make a new one."""
        self._live, self._reconnect, self.lost = live, restart, live.sign_in_taken_back

    def storage(self) -> VaultTokenStorage:
        if self.vault is None:
            raise SignInUnavailable(self.name)
        return VaultTokenStorage(self.vault, self.name, self.identity)

    def saw(self, response: httpx2.Response) -> None:
        """Every response of a connection without OAuth: a Bearer challenge makes the server one that has it."""
        challenge = response.headers.get("www-authenticate", "")
        if self._may_challenge and response.status_code == 401 and challenge.lower().startswith("bearer"):
            self.challenged = True

    async def check(self) -> bool:
        """Whether the vault holds tokens for this server now (another replica's sign-in counts); never for a
        `per_key` server's own (gateway) identity."""
        self.signed_in = self.vault is not None and not self.per_key and await self.storage().signed_in()
        return self.signed_in

    async def provider(self) -> httpx2.Auth | None:
        """The SDK's provider for a connection (None: the server uses no OAuth), given the stored expiry and
        metadata so that it refreshes rather than signing in again after a restart."""
        settings = self.settings
        if settings is None:
            return None
        storage = self._storage = self.storage()
        provider: OAuthClientProvider
        if settings.grant == "client_credentials":
            # Imported here, not at the top: with it come PyJWT and the parts of cryptography it signs with, about
            # 2 MB of memory that a gateway with no such server never uses (the idle gateway's, issue 47).
            from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider

            assert settings.client_id is not None and settings.client_secret is not None
            # The client's secret goes only to the authorization server it went to before (the SDK's `issuer`):
            # not wherever the MCP server's metadata points next time.
            provider = ClientCredentialsOAuthProvider(
                self.url, storage, settings.client_id, settings.client_secret.get_secret_value(),
                token_endpoint_auth_method="client_secret_post", scope=settings.scope,
                issuer=settings.issuer or await storage.issuer())
        else:
            provider = SharedSignIn(self.name, self.url, client_metadata(settings, UNUSED_REDIRECT), storage,
                                    redirect_handler=self._stop_at_the_browser, callback_handler=_never)
            provider.ended, provider.replaced = self._ended, self._reconnect
            registered = preregistered(settings, UNUSED_REDIRECT)
            if registered is not None and await storage.get_client_info() is None:
                await storage.set_client_info(registered)
        await storage.attach(provider)
        self._provider = provider
        return provider

    async def keep_fresh(self, look: float) -> None:
        """While the connection lives: its sign-in refreshed when due, and another replica's sign-out or new
        sign-in taken up within `look` seconds (shared_tokens.py). Nothing to do without a person's sign-in."""
        if isinstance(self._provider, SharedSignIn):
            await self._provider.keep_fresh(look)

    async def _stop_at_the_browser(self, authorization_url: str) -> NoReturn:
        self._ended()
        raise SignInNeeded(self.name, authorization_url)

    def _ended(self) -> None:
        self.sign_in_lost = True
        self.lost()

    async def waits_for_person(self, failure: BaseException | None = None) -> bool:
        """After a connection ended (in `failure`, if it failed to start): whether the server now waits for a
        person's sign-in. Tokens it no longer takes (revoked, and not refreshed) are forgotten."""
        refused = self.sign_in_lost or (failure is not None and any(
            isinstance(leaf, SignInNeeded) for leaf in leaves(failure)))
        if refused:
            await self.forget(revoke=False)  # dead already; and those in the vault may be another replica's newer
        return refused or (failure is not None and self.configured is None and self.challenged)

    async def check_quietly(self) -> bool:
        """`check`, with a state store that cannot answer now taken as "not yet" (looked at again later)."""
        try:
            return await self.check()
        except StateStoreError as exc:
            log.warning("mcp_sign_in_unreadable", server=self.name, error=str(exc))
            return False

    async def take_sign_in(self, tokens: OAuthToken) -> None:
        """A person's sign-in gave `tokens`: stored (written as a refresh is, one writer at a time), and the live
        connection acts with them from its next request and is replaced at once; a waiting server connects. The
        tokens they replace are revoked, so that no replica's connection goes on as the identity before."""
        storage = self._storage or self.storage()
        async with storage.holding():
            replaced = await storage.record()
            await storage.set_tokens(tokens, new_sign_in=True)
        self.signed_in, self.sign_in_lost = True, False
        self._changed.set()
        self._changed = anyio.Event()
        self.on_signed_in(self)  # a `per_key` server's new key: its connection starts (and is `served_by` now)
        self._connected = self._live.next_publication() if self._live is not None else anyio.Event()
        if self._live is not None and self._live.client is not None:
            self._reconnect()
        if (replaced.get("tokens") or {}).get("access_token") not in (None, tokens.access_token):
            await self._revoke(replaced)

    async def connected(self) -> None:
        """Returns once the connection a sign-in asked for is live (bound it with a timeout)."""
        await self._connected.wait()

    async def forget(self, revoke: bool = True) -> None:
        """Sign-out, or (`revoke=False`) a sign-in the server no longer accepts: the tokens go (the registration
        stays), from the vault and the live connection. A sign-out revokes them at the authorization server too,
        where it says how (RFC 7009): another replica's connection holds them in memory."""
        if self.vault is not None:
            storage = self._storage or self.storage()
            async with storage.holding():
                record = await storage.record()
                await storage.forget()
            if revoke:
                await self._revoke(record)
        self.signed_in = False

    async def _revoke(self, record: dict[str, Any]) -> None:
        settings = self.settings
        if settings is None or not record.get("client_info"):
            return
        provider = OAuthClientProvider(self.url, client_metadata(settings, UNUSED_REDIRECT), self.storage())
        provider.context.client_info = OAuthClientInformationFull.model_validate(record["client_info"])
        await revoke_tokens(self.name, provider.context, record)

    async def changed(self) -> None:
        await self._changed.wait()


class SignIns:
    """The pool's HTTP servers' OAuth by name: what the sign-in routes find, and what /health shows of it."""

    def __init__(self, vault: Vault | None) -> None:
        self.vault = vault
        self._auths: dict[str, ServerAuth] = {}

    def of(self, name: str, server: ServerConfig) -> ServerAuth | None:
        """A new server's (an HTTP one's: stdio servers have no OAuth)."""
        if not isinstance(server, HttpServerConfig):
            return None
        auth = self._auths[name] = ServerAuth(name, server, self.vault)
        return auth

    def find(self, name: str) -> ServerAuth | None:
        return self._auths.get(name)

    @property
    def any(self) -> bool:
        """Whether the pool has an HTTP server, the only kind that may ask for a sign-in."""
        return bool(self._auths)

    def drop(self, name: str) -> None:
        self._auths.pop(name, None)

    def shown(self, health: dict[str, ServerHealth]) -> dict[str, ServerHealth]:
        """`signed_in` beside each server a person signs in to (the status page's Sign in and Sign out)."""
        for name, auth in self._auths.items():
            if auth.person_signs_in and name in health:
                health[name]["signed_in"] = bool(auth.of_caller().signed_in)
        return health


class SignInUnavailable(Exception):
    """No vault to keep tokens in (TOOLBRIDGE_TOKEN_KEY is missing beside a Redis state store)."""

    def __init__(self, server: str) -> None:
        super().__init__(f"MCP server '{server}' needs a sign-in, and the gateway has nowhere to keep its tokens: "
                         "set TOOLBRIDGE_TOKEN_KEY (see docs/security.md)")


def client_metadata(settings: OAuthConfig, redirect_uri: str) -> OAuthClientMetadata:
    return OAuthClientMetadata(
        client_name=CLIENT_NAME, software_id=CLIENT_NAME, software_version=__version__, scope=settings.scope,
        redirect_uris=[redirect_uri],  # type: ignore[list-item]  # pydantic takes the string
        token_endpoint_auth_method="client_secret_post" if settings.client_secret else None,
    )


def preregistered(settings: OAuthConfig, redirect_uri: str) -> OAuthClientInformationFull | None:
    """The client mcp.json names (GitHub has no dynamic registration), as the SDK keeps a registered one."""
    if settings.client_id is None:
        return None
    secret = settings.client_secret.get_secret_value() if settings.client_secret else None
    return OAuthClientInformationFull(
        client_id=settings.client_id, client_secret=secret,
        redirect_uris=[redirect_uri],  # type: ignore[list-item]
        token_endpoint_auth_method="client_secret_post" if secret else "none",
        scope=settings.scope,
    )


async def _never() -> NoReturn:
    raise AssertionError("the redirect handler stops the flow first")
