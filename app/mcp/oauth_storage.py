"""One (server, identity) pair's OAuth sign-in kept in the token vault: the SDK's `TokenStorage` protocol
(`mcp.client.auth.oauth2.TokenStorage`), plus what that protocol leaves out and a restarted gateway needs.

The SDK stores tokens and the client registration only; it keeps a token's expiry time and the authorization
server's metadata in the provider's context, so a new provider over the same tokens would send an expired
access token, take the 401 for a sign-in and never refresh. This storage keeps both beside the tokens (the
absolute expiry, computed when a token is stored) and `attach` puts them back into a provider's context
before it connects, so a restart refreshes instead. One vault entry per pair, `oauth/{server}/{identity}`:
the identity is a label (the gateway's, or a key's name or digest), never a secret, as names are logged.

The expiry kept (and given to the provider) is a little before the token's own (`REFRESH_EARLY`): the SDK takes
any 401 for a sign-in asked again, so a token refused a moment before the gateway's clock says it expires (an
authorization server whose clock is ahead, whole-second rounding, the answer's own travel) would cost the person
a sign-in; refreshing early costs nothing. Replicas share one sign-in, and a refresh token works once: before a
refresh, a provider takes the tokens another replica stored, if any (`sync`, shared_tokens.py). Each sign-in has an
id, kept through its refreshes, so that a new sign-in is told from a refresh (`sync` says "replaced").
"""

import secrets
import time
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal

from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken

from app.state import Vault

GATEWAY_IDENTITY = "gateway"  # the one identity a gateway has unless a server signs in per key
REFRESH_EARLY = 60.0  # seconds before a token's expiry that it is refreshed; at most a quarter of its lifetime
# What writes a sign-in's tokens (a refresh, a new sign-in, a sign-out) holds it, one holder at a time across
# replicas, at most this long: longer than a refresh's request may take (shared_tokens.py).
SIGN_IN_HOLD = 45.0
Found = Literal["same", "newer", "replaced", "gone"]


class VaultTokenStorage:
    """The SDK's TokenStorage over the vault, for one server and one identity."""

    def __init__(self, vault: Vault, server: str, identity: str = GATEWAY_IDENTITY) -> None:
        self.vault, self.identity = vault, identity
        self.name = f"oauth/{server}/{identity}"
        self._provider: OAuthClientProvider | None = None
        self._held: str | None = None  # the access token the attached provider last read or stored
        self._sign_in: str | None = None  # the id of the sign-in those tokens are of

    def holding(self) -> AbstractAsyncContextManager[None]:
        """This sign-in held while its tokens are written: one writer at a time, on every replica (`Vault.holding`).

        Raises:
            StateStoreError: held elsewhere for too long, or the store did not answer.
        """
        return self.vault.holding(f"sign-in/{self.name}", SIGN_IN_HOLD)

    async def attach(self, provider: OAuthClientProvider) -> None:
        """Gives `provider` the stored expiry and metadata (before its first request), and from now on stores
        the metadata it discovers whenever it stores a registration or tokens."""
        record = await self._record()
        self._provider = provider
        if record.get("expires_at") is not None:
            provider.context.token_expiry_time = float(record["expires_at"])
        if record.get("metadata") is not None and provider.context.oauth_metadata is None:
            provider.context.oauth_metadata = OAuthMetadata.model_validate(record["metadata"])

    async def get_tokens(self) -> OAuthToken | None:
        # The SDK reads them again after a failed refresh, having cleared its expiry: it is given back too.
        record = await self._record()
        tokens = record.get("tokens")
        self._held, self._sign_in = (tokens["access_token"] if tokens else None), record.get("sign_in")
        if self._provider is not None and tokens:
            self._provider.context.token_expiry_time = record.get("expires_at")
        return OAuthToken.model_validate(tokens) if tokens else None

    async def sync(self) -> Found:
        """What the vault holds beside the attached provider's tokens: the same, "newer" ones (another replica
        refreshed them: each refresh token works once), another sign-in's ("replaced"), or none ("gone": signed
        out). The provider takes newer and replacing tokens, with their expiry. Only holding the sign-in
        (`holding`): a write in progress would otherwise be read as the tokens before it, taken back."""
        record = await self._record()
        tokens = record.get("tokens")
        if not tokens:
            return "gone"
        if self._provider is None or tokens["access_token"] == self._held:
            return "same"
        found: Found = "newer" if record.get("sign_in") == self._sign_in else "replaced"
        self._held, self._sign_in = tokens["access_token"], record.get("sign_in")
        self._provider.context.current_tokens = OAuthToken.model_validate(tokens)
        self._provider.context.token_expiry_time = record.get("expires_at")
        return found

    async def set_tokens(self, tokens: OAuthToken, new_sign_in: bool = False) -> None:
        """Stores `tokens` (a refresh's; with `new_sign_in`, a person's new sign-in), and makes them the
        attached provider's: a connection acts with them from its next request."""
        # Absolute, as the SDK's own context computes it (`calculate_token_expiry`), less the early margin.
        lifetime = tokens.expires_in
        expires_at = time.time() + lifetime - min(REFRESH_EARLY, lifetime / 4) if lifetime is not None else None
        if self._provider is not None:
            self._provider.context.current_tokens, self._provider.context.token_expiry_time = tokens, expires_at
        self._held = tokens.access_token
        parts: dict[str, Any] = {"tokens": tokens.model_dump(mode="json", exclude_none=True), "expires_at": expires_at}
        if new_sign_in:
            self._sign_in = parts["sign_in"] = secrets.token_hex(8)
        await self._update(**parts)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        client = (await self._record()).get("client_info")
        return OAuthClientInformationFull.model_validate(client) if client else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await self._update(client_info=client_info.model_dump(mode="json", exclude_none=True))

    async def set_metadata(self, metadata: OAuthMetadata) -> None:
        """The authorization server's metadata, for a sign-in the gateway runs itself (its callback route)."""
        await self._update(metadata=metadata.model_dump(mode="json", exclude_none=True))

    async def set_authorize(self, authorize: dict[str, Any]) -> None:
        """The authorization URL a discovery found (no secret: the client's id, the redirect URI, the resource),
        for the next sign-ins' starts (sign_in.py)."""
        await self._update(authorize=authorize)

    async def issuer(self) -> str | None:
        """The authorization server these tokens came from (its metadata's issuer), once one was discovered."""
        metadata = (await self._record()).get("metadata") or {}
        return str(metadata["issuer"]) if metadata.get("issuer") else None

    async def signed_in(self) -> bool:
        return bool((await self._record()).get("tokens"))

    async def forget(self) -> None:
        """Sign-out: the tokens and their expiry go, from the vault and the attached provider. The client
        registration and the metadata stay, so signing in again does not register another client."""
        record = await self._record()
        for part in ("tokens", "expires_at", "sign_in"):
            record.pop(part, None)
        await (self.vault.put(self.name, record) if record else self.vault.delete(self.name))
        if self._provider is not None:
            self._provider.context.clear_tokens()

    async def forget_registration(self) -> None:
        """The client registration goes (it names another redirect URI than the gateway's now)."""
        record = await self._record()
        record.pop("client_info", None)
        await self.vault.put(self.name, record)

    async def record(self) -> dict[str, Any]:
        """The whole entry: tokens, expiry, registration, metadata (what a sign-out revokes)."""
        return await self._record()

    async def _record(self) -> dict[str, Any]:
        return await self.vault.get(self.name) or {}

    async def _update(self, **parts: Any) -> None:
        record = await self._record() | parts
        discovered = self._provider.context.oauth_metadata if self._provider is not None else None
        if discovered is not None:
            record["metadata"] = discovered.model_dump(mode="json", exclude_none=True)
        await self.vault.put(self.name, record)
