"""One sign-in's tokens kept fresh where they are shared: by the replicas of a gateway, and by every request of a
connection. Refresh tokens rotate, and an authorization server that sees a spent one again may revoke the whole
grant (RFC 9700; Outline did, to LibreChat), signing everyone out: so no two refreshes of one sign-in ever run at
once, anywhere.

The SDK's provider refreshes by itself only before a request, by its clock, and takes any 401 for a sign-in
asked again. `SharedSignIn` makes every refresh its own: under the sign-in's hold in the state store (`Vault.
holding`: one replica at a time), after reading the vault, so that the one that waited takes the tokens the other
stored rather than spend a refresh token twice. A refresh runs when the tokens are due (a little before they
expire: oauth_storage.py), from the connection's own timer (`keep_fresh`) or, if that was late, before the
request; and once on a 401 for tokens the clock still calls valid (a server that lost its tokens, a clock
ahead). A refusal ends the sign-in (the server waits for a person); an authorization server that cannot be
reached ends only the request. The same timer reads the vault now and then (SIGN_IN_LOOK): a sign-out or a new
sign-in on another replica ends or replaces this connection within that time.

At sign-out the tokens are revoked at the authorization server (RFC 7009, `revoke_tokens`), or another
replica's connection would refresh them back into the vault. (The SDK's own log of the exceptions out of its
flow, the stop at the browser that starts every sign-in among them, never reaches the gateway's log:
app/logging.py.)
"""

import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, fields
from typing import Any

import anyio
import httpx2
import structlog
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.oauth2 import OAuthContext

from app.mcp.oauth_storage import VaultTokenStorage
from app.state import StateStoreError

log = structlog.get_logger("toolbridge.mcp")

REFRESH_TIMEOUT = httpx2.Timeout(30.0)  # less than the sign-in is held for (oauth_storage.py SIGN_IN_HOLD)
RETRY_FIRST, RETRY_MOST = 5.0, 300.0  # a refresh that could not be made is tried again after 5 s, 10 s ... 5 min
REVOKE_TIMEOUT = 10.0  # a sign-out waits this long per token for the authorization server to revoke it


class SignInNeeded(Exception):
    """The server wants a person's sign-in: raised where the SDK would open a browser, and where a refresh was
    refused or the sign-in was ended elsewhere."""

    def __init__(self, server: str, authorization_url: str = "") -> None:
        super().__init__(f"MCP server '{server}' needs a sign-in")
        self.authorization_url = authorization_url  # the SDK's, with its own state and verifier: see sign_in.py


class RefreshUnavailable(Exception):
    """The tokens are due and could not be refreshed now (the authorization server or the state store did not
    answer): the request fails, the sign-in stands, and the refresh is tried again."""

    def __init__(self, server: str, why: str) -> None:
        super().__init__(f"MCP server '{server}': its sign-in could not be refreshed now ({why}); try again")


@dataclass
class _RefreshedElsewhere(OAuthContext):
    """The SDK's context, whose flow never refreshes by itself: every refresh goes through `SharedSignIn`."""

    def can_refresh_token(self) -> bool:
        return False


class SharedSignIn(OAuthClientProvider):
    """The SDK's provider for a person's sign-in, its refreshes made one at a time across replicas. `ended` is
    called when the sign-in is over (refused, or signed out on another replica), `replaced` when another sign-in
    took its place on another replica."""

    def __init__(self, server: str, server_url: str, metadata: Any, storage: VaultTokenStorage, **handlers: Any):
        super().__init__(server_url, metadata, storage, **handlers)
        self.context = _RefreshedElsewhere(**{f.name: getattr(self.context, f.name) for f in fields(self.context)})
        self.server, self.storage = server, storage
        self.ended: Callable[[], None] = lambda: None
        self.replaced: Callable[[], None] = lambda: None

    # Typed loosely: the SDK's flow is written against httpx2's Request and Response, which pass through.
    async def _auth_flow(self, request: Any) -> AsyncGenerator[Any, Any]:
        await self.refresh()
        flow, retried = super()._auth_flow(request), False
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                if outgoing is request and response.status_code == 401 and not retried and self._refreshable():
                    retried = True  # once: refused again, it is the SDK's (a sign-in asked for)
                    await flow.aclose()
                    sent = request.headers.pop("Authorization", "").removeprefix("Bearer ")
                    await self.refresh(refused=sent)
                    flow = super()._auth_flow(request)
                    outgoing = await flow.__anext__()
                    continue
                try:
                    outgoing = await flow.asend(response)
                except StopAsyncIteration:
                    return
        finally:
            # Closed here, in this task: left to the garbage collector, the SDK's flow would release its lock
            # from another task ("The current task is not holding this lock").
            await flow.aclose()

    async def refresh(self, refused: str | None = None) -> None:
        """The tokens refreshed if they are due, or if `refused` (the access token a 401 answered) is still the
        one held, unless another replica stored newer ones meanwhile (taken instead).

        Raises:
            SignInNeeded: refused by the authorization server, or signed out elsewhere (`ended` was called).
            RefreshUnavailable: neither the authorization server nor the store could be asked now.
        """
        if not self._initialized:
            async with self.context.lock:
                if not self._initialized:
                    await self._initialize()
        if not self._refreshable() or (refused is None and not self._due()):
            return
        try:
            async with self.storage.holding():
                await self._refresh_held(refused)
        except StateStoreError as exc:  # the store did not answer, or another refresh held the sign-in too long
            log.warning("mcp_sign_in_refresh_failed", server=self.server, error=str(exc))
            raise RefreshUnavailable(self.server, "it could not be held for the refresh") from exc

    async def keep_fresh(self, look: float) -> None:
        """While the connection lives: its tokens refreshed when due, and the vault read every `look` seconds for
        another replica's sign-out or new sign-in. Returns when the sign-in has ended."""
        failures = 0
        while True:
            await anyio.sleep(self._until_next(look, failures))
            try:
                if self._due():
                    await self.refresh()
                else:
                    await self._look()
                failures = 0
            except RefreshUnavailable:
                failures += 1  # the calls meanwhile try too, each once
            except SignInNeeded:
                return
            except StateStoreError as exc:  # a look that can wait for the next
                log.warning("mcp_sign_in_unreadable", server=self.server, error=str(exc))

    async def _refresh_held(self, refused: str | None) -> None:
        """The refresh proper, holding the sign-in: after the vault is read, only if it is still needed."""
        found = await self.storage.sync()
        if found == "gone":
            await self._end("signed out")
        if found == "replaced":
            self.replaced()
        current = self.context.current_tokens.access_token if self.context.current_tokens else None
        if not self._due() and (refused is None or refused != current or found != "same"):
            return  # fresh: stored by another replica, or by another request here while this one waited
        request = await self._refresh_token()
        try:
            async with httpx2.AsyncClient(timeout=REFRESH_TIMEOUT) as http:
                response = await http.send(request)
        except httpx2.HTTPError as exc:
            log.warning("mcp_sign_in_refresh_failed", server=self.server, error=type(exc).__name__)
            raise RefreshUnavailable(self.server, "its authorization server could not be reached") from exc
        if response.status_code == 200 and await self._handle_refresh_response(response):
            log.info("mcp_sign_in_refreshed", server=self.server, identity=self.storage.identity)
            return
        if response.status_code >= 500 or response.status_code == 429:
            log.warning("mcp_sign_in_refresh_failed", server=self.server, status=response.status_code)
            raise RefreshUnavailable(self.server, f"its authorization server answered {response.status_code}")
        await self._end(f"refused ({response.status_code})")

    async def _look(self) -> None:
        # Held, as a refresh is: read while this replica's own refresh is storing its tokens, the vault would
        # still hold the ones before, and the provider would take those back.
        async with self.storage.holding():
            found = await self.storage.sync()
        if found == "gone":
            await self._end("signed out")
        elif found == "replaced":
            self.replaced()

    async def _end(self, why: str) -> None:
        log.warning("mcp_sign_in_ended", server=self.server, identity=self.storage.identity, reason=why)
        self.context.clear_tokens()
        self.ended()
        raise SignInNeeded(self.server)

    def _refreshable(self) -> bool:
        return OAuthContext.can_refresh_token(self.context)

    def _due(self) -> bool:
        expiry = self.context.token_expiry_time
        return self._refreshable() and expiry is not None and time.time() >= expiry

    def _until_next(self, look: float, failures: int) -> float:
        if failures:
            return min(RETRY_FIRST * 2.0 ** min(failures - 1, 16), RETRY_MOST)
        expiry = self.context.token_expiry_time
        if expiry is None or not self._refreshable():
            return look
        return max(0.0, min(look, expiry - time.time()))


async def revoke_tokens(server: str, context: OAuthContext, record: dict[str, Any]) -> None:
    """Revokes a vault record's tokens where its authorization server's metadata says (nothing if it names no
    endpoint), authenticated as `context`'s client. A failure is logged: the sign-out goes on."""
    endpoint = (record.get("metadata") or {}).get("revocation_endpoint")
    tokens = record.get("tokens") or {}
    if not endpoint or context.client_info is None:
        return
    async with httpx2.AsyncClient(timeout=REVOKE_TIMEOUT) as http:
        for kind in ("refresh_token", "access_token"):  # the refresh token first: it is the lasting one
            if not tokens.get(kind):
                continue
            data, headers = context.prepare_token_auth(
                {"token": tokens[kind], "token_type_hint": kind, "client_id": context.client_info.client_id},
                {"Content-Type": "application/x-www-form-urlencoded"})
            try:
                answer = await http.post(endpoint, data=data, headers=headers)
            except httpx2.HTTPError as exc:
                log.warning("mcp_sign_out_not_revoked", server=server, error=type(exc).__name__)
                continue
            if answer.status_code != 200:
                log.warning("mcp_sign_out_not_revoked", server=server, status=answer.status_code)
