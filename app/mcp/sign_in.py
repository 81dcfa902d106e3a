"""A person's sign-in to a server, as two requests of their browser (the routes are app/api/sign_in_routes.py).

`start`: the SDK discovers the authorization server and registers the gateway (it stops at the browser step,
server_auth.py); its authorization URL is kept but for `state` and the PKCE challenge, which are made anew here
because the SDK's die with its coroutine. That URL serves the next starts for DISCOVERY_FRESH seconds (kept in the
vault, for the same redirect URI and registration): a person clicking Sign in again, or a key clicking it a
hundred times, does not make the gateway ask the authorization server each time. What the callback needs (the
verifier, the redirect URI, whose sign-in) waits in the vault under a digest of `state`, for ten minutes, on
every replica; each key (`owner`) has at most MOST_PENDING of them, its own oldest dropped first, never
another's. `finish`: that record is taken once, the authorization server's `iss` checked (RFC 9207), the code
exchanged at its token endpoint with the registered client's credentials (the SDK's `prepare_token_auth`), and
the tokens stored: the server's connection is made, or replaced, with them.
"""

import hashlib
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import NoReturn
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx2
import structlog
from mcp.client.auth import OAuthClientProvider, OAuthFlowError, PKCEParameters
from mcp.client.auth.oauth2 import OAuthContext
from mcp.client.auth.utils import handle_token_response_scopes, validate_authorization_response_iss
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken

from app.mcp.oauth_storage import VaultTokenStorage
from app.mcp.server_auth import ServerAuth, SignInNeeded, client_metadata, preregistered
from app.openai.wire import JSONObject
from app.state import Vault

log = structlog.get_logger("toolbridge.mcp")

SIGN_IN_SECONDS = 600  # from the status page's button to the callback: a person reading a consent page
PENDING = "oauth-pending/"
MOST_PENDING = 20  # sign-ins one key started and has not finished, kept until they expire: a bound on its clicking
DISCOVERY_FRESH = 300.0  # seconds a discovery (and registration) serves the next sign-ins' starts
HTTP_TIMEOUT = httpx2.Timeout(30.0)
# A JSON-RPC request the server refuses without a token: what makes the SDK discover where to sign in.
_PROBE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "toolbridge", "version": "0"}}}


class SignInFailed(Exception):
    """Why a sign-in cannot start or finish, in words for the person at the browser (never a token)."""


async def start(auth: ServerAuth, redirect_uri: str, owner: str, browser: str) -> str:
    """The authorization server's URL to send the person's browser to. `owner`: whose sign-in (a key's
    digest), for the log and the bound on its pending sign-ins; `browser`: a secret the starting browser keeps (a
    cookie), without which the way back is refused: a sign-in link sent to someone else cannot sign the gateway
    (or a key) in as them.

    Raises:
        SignInFailed: the server does not ask for a sign-in, or its authorization server cannot be reached.
        SignInUnavailable: no vault.
    """
    settings = auth.settings
    if settings is None or not auth.person_signs_in:
        raise SignInFailed(f"MCP server '{auth.name}' does not ask for a person's sign-in.")
    storage = auth.storage()
    await _registration_for(storage, auth, redirect_uri)
    sdk_url = await _authorization_url(auth, storage, redirect_uri)
    pkce, state = PKCEParameters.generate(), secrets.token_urlsafe(32)
    query = dict(parse_qsl(urlsplit(sdk_url).query)) | {"state": state, "code_challenge": pkce.code_challenge}
    await _prune(storage.vault, owner)
    await storage.vault.put(_pending_name(state), {
        "server": auth.name, "identity": auth.identity, "browser": _digest(browser), "verifier": pkce.code_verifier,
        "redirect_uri": redirect_uri,
        "owner": owner,
        "resource": query.get("resource"), "scope": query.get("scope"), "expires_at": time.time() + SIGN_IN_SECONDS,
    })
    log.info("mcp_sign_in_started", server=auth.name, key=owner)
    return urlunsplit(urlsplit(sdk_url)._replace(query=urlencode(query)))


async def finish(vault: Vault, find: Callable[[str], ServerAuth | None], state: str, code: str | None,
                 iss: str | None, error: str | None, browser: str = "") -> ServerAuth:
    """Takes the sign-in `state` names (once), checks and exchanges the code, stores the tokens (the server's
    connection replaced: `ServerAuth.take_sign_in`); the sign-in's ServerAuth (a key's, on a `per_key` server).
    `find(name)` is the pool's ServerAuth for a name (None once removed).

    Raises:
        SignInFailed: an unknown, used or expired `state`, a refusal, a wrong issuer, a code not exchanged.
    """
    pending = await _taken(vault, state, browser)
    server = str(pending["server"])  # `start` wrote the server's name
    auth = find(server)
    if auth is None or auth.settings is None:
        raise SignInFailed(f"MCP server '{server}' is no longer in the gateway's configuration.")
    if auth.per_key:  # the key's own sign-in, whoever's browser comes back with it
        auth = auth.for_identity(str(pending.get("identity")))
    if error:
        raise SignInFailed(f"The sign-in to '{server}' was not given ({error[:60]}); nothing changed.")
    storage = auth.storage()
    record = await vault.get(storage.name) or {}
    metadata = OAuthMetadata.model_validate(record["metadata"]) if record.get("metadata") else None
    try:
        validate_authorization_response_iss(iss, metadata)
    except OAuthFlowError as exc:
        log.warning("mcp_sign_in_refused", server=server, reason="issuer mismatch")
        raise SignInFailed(f"The sign-in to '{server}' came back from another authorization server than the one "
                           "asked; it was not used.") from exc
    if not code:
        raise SignInFailed(f"The sign-in to '{server}' came back without a code.")
    tokens = await _exchanged(auth, storage, metadata, pending, code)
    await auth.take_sign_in(tokens)
    log.info("mcp_signed_in", server=server, key=pending.get("owner"))
    return auth


async def _taken(vault: Vault, state: str, browser: str) -> JSONObject:
    """The sign-in `state` names, taken from the vault (once), if this browser started it in time."""
    pending = await vault.get(_pending_name(state)) if state else None
    if pending is not None:
        await vault.delete(_pending_name(state))  # single use, before anything can fail
    expires_at = pending.get("expires_at") if pending is not None else None  # `start` wrote a number
    if pending is None or not isinstance(expires_at, int | float) or expires_at < time.time():
        raise SignInFailed("This sign-in was finished already, or it expired (ten minutes), or it never started "
                           "here: start again from the status page.")
    started_in = pending.get("browser", "")  # `start` wrote the digest of its browser's cookie
    if not isinstance(started_in, str) or not secrets.compare_digest(started_in, _digest(browser)):
        log.warning("mcp_sign_in_refused", server=pending["server"], reason="finished in another browser")
        raise SignInFailed("This sign-in was started in another browser: a sign-in link is for the person who "
                           "opened it from the status page or a chat. Start again there.")
    return pending


async def _registration_for(storage: VaultTokenStorage, auth: ServerAuth, redirect_uri: str) -> None:
    """A registration whose redirect URIs hold this one: mcp.json's client, or a dynamic one registered anew
    when the gateway is reached at another address than before."""
    assert auth.settings is not None
    registered = preregistered(auth.settings, redirect_uri)
    if registered is not None:
        await storage.set_client_info(registered)
        return
    known = await storage.get_client_info()
    if known is not None and redirect_uri not in [str(uri) for uri in known.redirect_uris or []]:
        await storage.forget_registration()


async def _authorization_url(auth: ServerAuth, storage: VaultTokenStorage, redirect_uri: str) -> str:
    """The authorization URL the SDK would open: the one found less than DISCOVERY_FRESH seconds ago for this
    redirect URI and registration, or discovered (and registered) now."""
    assert auth.settings is not None
    record = await storage.record()
    known = record.get("authorize") or {}
    client_id = (record.get("client_info") or {}).get("client_id")
    if (known.get("redirect_uri") == redirect_uri and client_id and known.get("client_id") == client_id
            and time.time() - float(known.get("at", 0)) < DISCOVERY_FRESH):
        return str(known["url"])
    provider = OAuthClientProvider(auth.url, client_metadata(auth.settings, redirect_uri), _WithoutTokens(storage),
                                   redirect_handler=_stop(auth.name), callback_handler=_unused)
    url = await _discovered(provider, auth)
    if provider.context.oauth_metadata is not None:
        await storage.set_metadata(provider.context.oauth_metadata)
    client = provider.context.client_info
    await storage.set_authorize({"url": url, "redirect_uri": redirect_uri, "at": time.time(),
                                 "client_id": client.client_id if client is not None else None})
    return url


async def _discovered(provider: OAuthClientProvider, auth: ServerAuth) -> str:
    """Lets the SDK discover and register, up to the browser step; the authorization URL it would open."""
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
    try:
        async with httpx2.AsyncClient(auth=provider, timeout=HTTP_TIMEOUT, follow_redirects=True) as http:
            await http.post(auth.url, json=_PROBE, headers=headers)
    except SignInNeeded as stopped:
        return stopped.authorization_url
    except (httpx2.HTTPError, OAuthFlowError, ValueError) as exc:  # the SDK's errors name no secret
        log.warning("mcp_sign_in_discovery_failed", server=auth.name, error=str(exc)[:300])
        raise SignInFailed(f"MCP server '{auth.name}' or its authorization server could not be asked how to "
                           "sign in (the gateway's log says why).") from exc
    raise SignInFailed(f"MCP server '{auth.name}' answered without asking for a sign-in.")


async def _exchanged(auth: ServerAuth, storage: VaultTokenStorage, metadata: OAuthMetadata | None,
                     pending: JSONObject, code: str) -> OAuthToken:
    client = await storage.get_client_info()
    if client is None:
        raise SignInFailed(f"The gateway's registration with '{auth.name}' is gone; start again.")
    # `start` wrote the redirect URI, the verifier and the resource as text.
    data = {"grant_type": "authorization_code", "code": code, "redirect_uri": str(pending["redirect_uri"]),
            "client_id": client.client_id, "code_verifier": str(pending["verifier"])}
    if pending.get("resource"):
        data["resource"] = str(pending["resource"])  # RFC 8707, as the authorization request had it
    token_endpoint = str(metadata.token_endpoint) if metadata is not None else f"{_origin(auth.url)}/token"
    context = _context_of(auth, client, str(pending["redirect_uri"]))  # `start` wrote it, as text
    # Accept: GitHub answers form-encoded unless asked for JSON (RFC 6749 says JSON; some servers wait to be asked).
    data, headers = context.prepare_token_auth(data, {"Content-Type": "application/x-www-form-urlencoded",
                                                      "Accept": "application/json"})
    async with httpx2.AsyncClient(timeout=HTTP_TIMEOUT) as http:
        try:
            response = await http.post(token_endpoint, data=data, headers=headers)
        except httpx2.HTTPError as exc:
            raise SignInFailed(f"The authorization server of '{auth.name}' could not be reached.") from exc
    if response.status_code not in (200, 201):
        log.warning("mcp_sign_in_refused", server=auth.name, reason=f"token endpoint answered {response.status_code}")
        raise SignInFailed(f"The authorization server of '{auth.name}' did not accept the sign-in "
                           f"(HTTP {response.status_code}); start again.")
    try:
        tokens = await handle_token_response_scopes(response)
    except Exception as exc:  # boundary: the SDK raises several kinds for a malformed answer
        raise SignInFailed(f"The authorization server of '{auth.name}' answered with no usable token.") from exc
    if tokens.scope is None:
        # RFC 6749 5.1: the scope asked for, as the SDK records it (`start` wrote it, text or None).
        scope = pending.get("scope")
        tokens.scope = scope if isinstance(scope, str) else None
    return tokens


def _context_of(auth: ServerAuth, client: OAuthClientInformationFull, redirect_uri: str) -> OAuthContext:
    assert auth.settings is not None
    provider = OAuthClientProvider(auth.url, client_metadata(auth.settings, redirect_uri), _WithoutTokens(None))
    provider.context.client_info = client
    return provider.context


async def _prune(vault: Vault, owner: str) -> None:
    """Expired pending sign-ins go, and `owner`'s oldest beyond MOST_PENDING - 1 (room for the one it starts);
    another key's never."""
    now = time.time()
    own: list[tuple[float, str]] = []
    for name in await vault.names(PENDING):
        record = await vault.get(name)
        expires_at = record.get("expires_at", 0) if record is not None else None  # `start` wrote a number
        if record is None or not isinstance(expires_at, int | float) or expires_at < now:
            await vault.delete(name)
        elif record.get("owner") == owner:
            own.append((float(expires_at), name))
    for _, name in sorted(own)[:max(0, len(own) - MOST_PENDING + 1)]:
        await vault.delete(name)


def _pending_name(state: str) -> str:
    # A digest: the vault's names appear in logs; the state itself is the callback's capability.
    return PENDING + _digest(state)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class _WithoutTokens:
    """The vault's storage for a new sign-in: no tokens read (those there are what the sign-in replaces), the
    registration read and kept."""

    def __init__(self, storage: VaultTokenStorage | None) -> None:
        self._storage = storage

    async def get_tokens(self) -> OAuthToken | None:
        return None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        raise AssertionError("a sign-in's tokens are stored by `finish`")

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return await self._storage.get_client_info() if self._storage is not None else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if self._storage is not None:
            await self._storage.set_client_info(client_info)


def _stop(server: str) -> Callable[[str], Awaitable[NoReturn]]:
    async def stop(authorization_url: str) -> NoReturn:
        raise SignInNeeded(server, authorization_url)

    return stop


async def _unused() -> NoReturn:
    raise AssertionError("the redirect handler stops the flow first")
