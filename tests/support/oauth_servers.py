"""A real OAuth authorization server and a protected MCP server, built from the mcp SDK's server auth pieces, for
the sign-in tests of issue 31. Both run in-process on free 127.0.0.1 ports (`ServerThread`), over real HTTP.

- `AuthorizationServer`: the SDK's routes (`mcp.server.auth.routes.create_auth_routes`: RFC 8414 metadata,
  dynamic client registration, `/authorize` with PKCE, `/token` for the code and refresh grants, `/revoke`) on an
  in-memory `MemoryProvider`, plus a consent page of ours (`GET /consent`: a plain HTML form with the user's name
  and an "Allow" and a "Deny" button, so a browser or a test can submit it). Knobs: `access_token_lifetime`
  (seconds, for expiry tests), `provider.revoke_refresh_tokens(subject)`, `provider.expire_access_tokens()`,
  `wrong_issuer="metadata"` (the metadata names another issuer: RFC 8414 §3.3) or `wrong_issuer="redirect"`
  (the metadata announces RFC 9207 `iss` and the redirect back carries a wrong one). `registration=False`: no
  dynamic client registration (as GitHub); `provider.preregister(...)` a client beforehand instead, a confidential
  one with its secret. `/token` also answers `grant_type=client_credentials` for a client registered with that
  grant (machine to machine: the subject is the client's id, no refresh token), in front of the SDK's handler,
  which serves no such grant. `clock_ahead` (seconds): both servers judge a token's expiry by a clock that far
  ahead of this machine's, exactly (not in whole seconds), as an authorization server with a fast clock would.
  Refresh tokens rotate (each works once); one presented again is a reuse (RFC 9700 4.14.2), counted in
  `provider.reuses`, and with `reuse_revokes_grant=True` it revokes the whole grant, every access and refresh
  token issued since that sign-in, as Outline's did to LibreChat (danny-avila/LibreChat#14583). `hold_refreshes`
  (seconds): each refresh waits that long at most for another one to arrive, and both go on together, so that
  two clients' refreshes of one token meet at the server whenever their timing allows it, not by luck.
  `requests` counts the requests it was sent by path (its metadata's, `/register`, ...).
- `ProtectedMcpServer`: an `MCPServer` over streamable HTTP at `/mcp` with `AuthSettings` (resource
  `{url}/mcp`, scope `mcp`, tokens bound to that resource), the SDK's protected-resource metadata at
  `/.well-known/oauth-protected-resource/mcp`, and 401 + `WWW-Authenticate: Bearer ... resource_metadata="..."`
  for a missing, unknown or expired token. Tools: `whoami` (the subject the token was issued to) and `echo`.

What the SDK's client does against them (mcp 2.3.0, `mcp/client/auth/oauth2.py`; shown by
tests/mcp/test_oauth_servers.py):
- `OAuthClientProvider(server_url, client_metadata, storage, redirect_handler=None, callback_handler=None,
  client_metadata_url=None, validate_resource_url=None)` (line 300) is an `httpx2.Auth`: give it to
  `httpx2.AsyncClient(auth=...)` and that to `streamable_http_client(url, http_client=...)`. No timeout of its
  own (its requests use the client's). `TokenStorage` (line 130): async `get_tokens`/`set_tokens` (`OAuthToken`),
  `get_client_info`/`set_client_info` (`OAuthClientInformationFull`), read once per provider (line 564); neither
  the expiry time nor the discovered metadata is stored.
- It refreshes only before sending, by its own clock (line 613). A 401 always means discovery and then a full
  authorization (lines 631-786): `redirect_handler(url)` then `callback_handler()` in the same coroutine (lines
  429-431), with state and PKCE verifier as locals, so the flow cannot be split inside the SDK; a gateway stops
  it (no redirect handler, or one that raises) after discovery and registration, and does the browser leg itself.
"""

import hmac
import html
import secrets
import time
from collections import Counter
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any, Literal, Self
from urllib.parse import parse_qsl, urlencode

import anyio
from mcp.server.auth.handlers.metadata import MetadataHandler
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    TokenError,
    TokenVerifier,
    construct_redirect_uri,
)
from mcp.server.auth.routes import build_metadata, cors_middleware, create_auth_routes
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl, ConfigDict, TypeAdapter
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.support.servers import ServerThread, bound_socket

SCOPE = "mcp"
CODE_LIFETIME = 300
WRONG_ISSUER = "http://127.0.0.1:9/not-this-server"
# Issuer URLs as the SDK renders them: without the trailing slash pydantic adds to a bare origin by default.
_URL = TypeAdapter(AnyHttpUrl, config=ConfigDict(url_preserve_empty_path=True))


@dataclass
class _Consent:
    """An authorization request waiting on the consent page."""

    client_id: str
    params: AuthorizationParams


@dataclass
class MemoryProvider:
    """The SDK's `OAuthAuthorizationServerProvider` in memory, with counters the tests read.

    Both servers run in their own threads and event loops; every method here finishes without awaiting
    anything, so the dicts are never seen half-updated."""

    issuer: str
    access_token_lifetime: int = 3600
    iss_in_redirect: str | None = None
    clients: dict[str, OAuthClientInformationFull] = field(default_factory=dict)
    consents: dict[str, _Consent] = field(default_factory=dict)
    codes: dict[str, AuthorizationCode] = field(default_factory=dict)
    access_tokens: dict[str, AccessToken] = field(default_factory=dict)
    refresh_tokens: dict[str, RefreshToken] = field(default_factory=dict)
    authorizations: list[str] = field(default_factory=list)  # the subject of each consent given
    refreshes: int = 0
    resources: list[str | None] = field(default_factory=list)  # the RFC 8707 resource of each token issued
    client_credential_grants: int = 0
    code_exchange_accepts: list[str] = field(default_factory=list)  # the Accept header of each code exchange
    clock_ahead: float = 0.0
    issued_at: dict[str, float] = field(default_factory=dict)  # access token -> when, by this machine's clock
    reuse_revokes_grant: bool = False
    reuses: int = 0  # refresh tokens presented again after they were spent
    spent: set[str] = field(default_factory=set)  # refresh tokens used once
    grant_of: dict[str, str] = field(default_factory=dict)  # token -> its grant: a sign-in and its refreshes

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        request_id = secrets.token_urlsafe(16)
        self.consents[request_id] = _Consent(client.client_id, params)
        return f"{self.issuer}/consent?{urlencode({'request': request_id})}"

    def consent(self, request_id: str, subject: str | None) -> str:
        """Where the browser goes after the consent page: the client's redirect URI with a code (Allow,
        `subject` given) or `error=access_denied` (Deny). Raises KeyError for an unknown request."""
        pending = self.consents.pop(request_id)
        params = pending.params
        if subject is None:
            return construct_redirect_uri(str(params.redirect_uri), error="access_denied", state=params.state,
                                          iss=self.iss_in_redirect)
        code = secrets.token_urlsafe(32)
        self.codes[code] = AuthorizationCode(
            code=code, scopes=params.scopes or [SCOPE], expires_at=time.time() + CODE_LIFETIME,
            client_id=pending.client_id, code_challenge=params.code_challenge, redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly, resource=params.resource,
            subject=subject,
        )
        self.authorizations.append(subject)
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state,
                                      iss=self.iss_in_redirect)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        if self.codes.pop(authorization_code.code, None) is None:
            raise TokenError("invalid_grant", "authorization code already used")
        code = authorization_code
        return self._issue(client.client_id, code.scopes, code.resource, code.subject, grant=secrets.token_hex(8))

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        if refresh_token in self.spent:
            self.reuses += 1
            if self.reuse_revokes_grant:
                self.revoke_grant(self.grant_of[refresh_token])
            return None  # the SDK's handler answers invalid_grant
        return self.refresh_tokens.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        if self.refresh_tokens.pop(refresh_token.token, None) is None:  # rotated: each refresh token works once
            raise TokenError("invalid_grant", "refresh token already used")
        self.spent.add(refresh_token.token)
        self.refreshes += 1
        return self._issue(client.client_id, scopes, refresh_token.resource, refresh_token.subject,
                           grant=self.grant_of[refresh_token.token])

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.access_tokens.get(token)

    def expired(self, token: str) -> bool:
        """Whether `token` expired by this server's clock (`clock_ahead` of this machine's)."""
        issued = self.issued_at.get(token)
        return issued is not None and time.time() + self.clock_ahead > issued + self.access_token_lifetime

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access_tokens.pop(token.token, None)
        self.refresh_tokens.pop(token.token, None)

    def revoke_grant(self, grant: str) -> None:
        """Every token of the sign-in `grant` stops working (RFC 9700's answer to a refresh token's reuse)."""
        for tokens in (self.access_tokens, self.refresh_tokens):
            for token in [token for token in tokens if self.grant_of.get(token) == grant]:
                del tokens[token]

    def revoke_refresh_tokens(self, subject: str | None = None) -> None:
        """The refresh tokens of `subject` (or everyone's) stop working, as when a person revokes the app at the
        provider."""
        for token in [token for token, issued in self.refresh_tokens.items() if subject in (None, issued.subject)]:
            del self.refresh_tokens[token]

    def preregister(self, client_id: str, client_secret: str | None = None, redirect_uris: list[str] | None = None,
                    grant_types: list[str] | None = None) -> OAuthClientInformationFull:
        """A client registered by its operator beforehand (no dynamic registration): confidential when it has a
        secret, sent in the token request's body (`client_secret_post`)."""
        client = OAuthClientInformationFull(
            client_id=client_id, client_secret=client_secret, client_name=client_id, scope=SCOPE,
            redirect_uris=redirect_uris,  # type: ignore[arg-type]  # pydantic takes the strings
            grant_types=grant_types or ["authorization_code", "refresh_token"],
            token_endpoint_auth_method="client_secret_post" if client_secret else "none",
        )
        self.clients[client_id] = client
        return client

    def client_credentials(self, form: dict[str, str]) -> OAuthToken:
        """RFC 6749 4.4 for a confidential client with that grant (its secret in the body): a token bound to the
        requested resource, for the client itself. Raises TokenError."""
        client = self.clients.get(form.get("client_id", ""))
        secret = form.get("client_secret", "")
        if client is None or not client.client_secret or not hmac.compare_digest(client.client_secret, secret):
            raise TokenError("invalid_client", "unknown client or wrong secret")
        if "client_credentials" not in client.grant_types:
            raise TokenError("unauthorized_client", "this client may not use client_credentials")
        self.client_credential_grants += 1
        return self._issue(client.client_id, [SCOPE], form.get("resource"), client.client_id, refresh=False,
                           grant=secrets.token_hex(8))

    def expire_access_tokens(self) -> None:
        """Every access token is rejected from now on, while the client still believes it valid."""
        self.access_tokens.clear()

    def _issue(self, client_id: str, scopes: list[str], resource: str | None, subject: str | None, *, grant: str,
               refresh: bool = True) -> OAuthToken:
        access, refresh_token = f"at-{secrets.token_urlsafe(24)}", f"rt-{secrets.token_urlsafe(24)}"
        self.grant_of[access] = self.grant_of[refresh_token] = grant
        expires_at = int(time.time()) + self.access_token_lifetime
        self.access_tokens[access] = AccessToken(token=access, client_id=client_id, scopes=scopes,
                                                 expires_at=expires_at, resource=resource, subject=subject)
        self.issued_at[access] = time.time()
        if refresh:
            self.refresh_tokens[refresh_token] = RefreshToken(token=refresh_token, client_id=client_id,
                                                              scopes=scopes, resource=resource, subject=subject)
        self.resources.append(resource)
        return OAuthToken(access_token=access, expires_in=self.access_token_lifetime, scope=" ".join(scopes),
                          refresh_token=refresh_token if refresh else None)


@dataclass
class RefreshGate:
    """Holds each refresh up to `seconds` until another arrives, then lets both on (in the server's own loop)."""

    seconds: float
    met: int = 0  # refreshes that found another waiting
    _waiting: anyio.Event | None = None

    async def meet(self) -> None:
        if self._waiting is not None:
            self._waiting.set()
            self._waiting, self.met = None, self.met + 1
            return
        waiting = self._waiting = anyio.Event()
        with anyio.move_on_after(self.seconds):
            await waiting.wait()
        if self._waiting is waiting:
            self._waiting = None


class _TokenEndpoint:
    """`/token`: the client_credentials grant answered here, every other grant handed on to the SDK's handler
    (its body replayed, as it was read to see the grant)."""

    def __init__(self, provider: MemoryProvider, sdk: ASGIApp, gate: RefreshGate | None = None) -> None:
        self.provider, self.sdk, self.gate = provider, sdk, gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await Request(scope, receive).body()
        form = dict(parse_qsl(body.decode(errors="replace")))
        if form.get("grant_type") == "authorization_code":
            self.provider.code_exchange_accepts.append(Headers(scope=scope).get("accept", ""))
        if form.get("grant_type") == "refresh_token" and self.gate is not None:
            await self.gate.meet()
        if scope["method"] != "POST" or form.get("grant_type") != "client_credentials":
            replayed = False

            async def replay() -> dict[str, Any]:
                nonlocal replayed
                if replayed:
                    return await receive()
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}

            await self.sdk(scope, replay, send)
            return
        try:
            token = self.provider.client_credentials(form)
        except TokenError as exc:
            answer: Response = JSONResponse({"error": exc.error, "error_description": exc.error_description},
                                            status_code=401 if exc.error == "invalid_client" else 400)
        else:
            answer = JSONResponse(token.model_dump(exclude_none=True), headers={"Cache-Control": "no-store"})
        await answer(scope, receive, send)


CONSENT_PAGE = """<!doctype html>
<html><head><title>Sign in to the test provider</title></head>
<body><h1>Allow {client} to use your account?</h1>
<form method="post" action="/consent">
<input type="hidden" name="request" value="{request}">
<label>Signed in as <input type="text" name="user" value="{user}"></label>
<button type="submit" name="decision" value="allow">Allow</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form></body></html>
"""


class AuthorizationServer(ServerThread):
    """The authorization server on its own port; `provider` is its state. `user` is the name the consent page
    offers (a browser may type another, so two sign-ins can be two people)."""

    def __init__(self, *, access_token_lifetime: int = 3600, user: str = "alice",
                 wrong_issuer: Literal["metadata", "redirect"] | None = None, registration: bool = True,
                 clock_ahead: float = 0.0, reuse_revokes_grant: bool = False, hold_refreshes: float = 0.0) -> None:
        sock = bound_socket()  # bound now: the issuer URL names its port before the server starts
        self.issuer = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self.user = user
        self.provider = MemoryProvider(self.issuer, access_token_lifetime, clock_ahead=clock_ahead,
                                       iss_in_redirect=WRONG_ISSUER if wrong_issuer == "redirect" else None,
                                       reuse_revokes_grant=reuse_revokes_grant)
        self.requests: Counter[str] = Counter()
        self.refresh_gate = RefreshGate(hold_refreshes) if hold_refreshes else None
        app = Starlette(routes=self._routes(wrong_issuer, registration))

        async def counted(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                self.requests[scope["path"]] += 1
            await app(scope, receive, send)

        super().__init__(counted, sock=sock)

    def _routes(self, wrong_issuer: str | None, registering: bool = True) -> list[Route]:
        registration = ClientRegistrationOptions(enabled=registering, valid_scopes=[SCOPE], default_scopes=[SCOPE])
        revocation = RevocationOptions(enabled=True)
        routes = create_auth_routes(self.provider, _URL.validate_python(self.issuer),
                                    client_registration_options=registration, revocation_options=revocation)
        sdk_token = next(route for route in routes if isinstance(route, Route) and route.path == "/token")
        own = [Route("/consent", self._consent_page, methods=["GET"]),
               Route("/consent", self._consent_given, methods=["POST"]),
               Route("/token", _TokenEndpoint(self.provider, sdk_token.app, self.refresh_gate),
                     methods=["POST", "OPTIONS"])]
        if wrong_issuer is not None:
            # Placed first, so it shadows the SDK's own metadata route.
            metadata = build_metadata(_URL.validate_python(self.issuer), None, registration, revocation)
            if wrong_issuer == "metadata":
                metadata.issuer = _URL.validate_python(WRONG_ISSUER)
            else:
                metadata.authorization_response_iss_parameter_supported = True
            handler = cors_middleware(MetadataHandler(metadata).handle, ["GET", "OPTIONS"])
            own.append(Route("/.well-known/oauth-authorization-server", handler, methods=["GET", "OPTIONS"]))
        return own + routes

    async def _consent_page(self, request: Request) -> Response:
        request_id = request.query_params.get("request", "")
        pending = self.provider.consents.get(request_id)
        if pending is None:
            return HTMLResponse("<p>This sign-in request is unknown or was already answered.</p>", status_code=400)
        client = self.provider.clients[pending.client_id].client_name or pending.client_id
        page = CONSENT_PAGE.format(client=html.escape(client), request=html.escape(request_id),
                                   user=html.escape(self.user))
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})

    async def _consent_given(self, request: Request) -> Response:
        form = await request.form()
        allowed = form.get("decision") == "allow"
        try:
            location = self.provider.consent(str(form.get("request", "")), str(form.get("user")) if allowed else None)
        except KeyError:
            return HTMLResponse("<p>This sign-in request is unknown or was already answered.</p>", status_code=400)
        return RedirectResponse(location, status_code=302, headers={"Cache-Control": "no-store"})


class _ProviderVerifier(TokenVerifier):
    """Asks the authorization server's provider directly: both run in this process (a real resource server
    would introspect or check a JWT; what matters here is the resource server's side of the protocol)."""

    def __init__(self, provider: MemoryProvider) -> None:
        self.provider = provider

    async def verify_token(self, token: str) -> AccessToken | None:
        return None if self.provider.expired(token) else await self.provider.load_access_token(token)


class ProtectedMcpServer(ServerThread):
    """An MCP server that takes only tokens of `authorization_server` issued for it. `url` is its origin;
    `mcp_url` the endpoint to connect to."""

    def __init__(self, authorization_server: AuthorizationServer) -> None:
        sock = bound_socket()  # bound now: the server's own URL names its port before it starts
        self.mcp_url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        settings = AuthSettings(issuer_url=_URL.validate_python(authorization_server.issuer),
                                resource_server_url=_URL.validate_python(self.mcp_url),
                                required_scopes=[SCOPE], validate_token_resource=True)
        server = MCPServer("protected", token_verifier=_ProviderVerifier(authorization_server.provider),
                           auth=settings)

        @server.tool()
        def whoami() -> str:
            """The name of the person this server is acting for."""
            token = get_access_token()
            return (token.subject or "") if token else ""

        @server.tool()
        def echo(text: str) -> str:
            """Says `text` back."""
            return text

        super().__init__(server.streamable_http_app(), sock=sock)


@dataclass
class OAuthPair:
    """Both servers, started and stopped together."""

    authorization_server: AuthorizationServer
    mcp_server: ProtectedMcpServer

    @classmethod
    def start(cls, **options: Any) -> Self:
        authorization_server = AuthorizationServer(**options)
        return cls(authorization_server, ProtectedMcpServer(authorization_server))

    def __enter__(self) -> Self:
        self.authorization_server.__enter__()
        try:
            self.mcp_server.__enter__()
        except BaseException:
            self.authorization_server.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.mcp_server.__exit__(None, None, None)
        finally:
            self.authorization_server.__exit__(None, None, None)


class ConsentForm(HTMLParser):
    """The first form of a page as a browser reads it: its action, its fields, and its buttons (text ->
    (name, value)); for the tests that play the person at the consent page without a browser."""

    def __init__(self) -> None:
        super().__init__()
        self.action = ""
        self.fields: dict[str, str] = {}
        self.buttons: dict[str, tuple[str, str]] = {}  # button text -> (name, value)
        self._button: tuple[str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        if tag == "form" and not self.action:
            self.action = attributes.get("action", "")
        elif tag == "input" and "name" in attributes:
            self.fields[attributes["name"]] = attributes.get("value", "")
        elif tag == "button":
            self._button = (attributes.get("name", ""), attributes.get("value", ""))

    def handle_data(self, data: str) -> None:
        if self._button is not None and data.strip():
            self.buttons[data.strip()] = self._button
            self._button = None
