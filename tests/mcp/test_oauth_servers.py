"""The mcp SDK's OAuth client (`mcp.client.auth.OAuthClientProvider`) against the real authorization server and
protected MCP server of tests/support/oauth_servers.py: sign-in with dynamic registration and PKCE, the tools
listed and called, refresh on expiry, a new sign-in after a revoked refresh token, the issuer and `state` checks,
two identities, a refresh token's reuse seen (and the grant revoked for it), and what a gateway can and cannot take
from the SDK (see the support module's docstring)."""

import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, OAuthFlowError, PKCEParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthMetadata, OAuthToken

from tests.support.oauth_servers import SCOPE, WRONG_ISSUER, ConsentForm, OAuthPair

pytestmark = pytest.mark.anyio
TIMEOUT = 60
# Nothing listens here: the browser stops at the redirect back, as a test does not need the page behind it.
REDIRECT_URI = "http://127.0.0.1:1/oauth/callback"


class MemoryStorage:
    """The SDK's `TokenStorage` protocol, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class Browser:
    """A person at a browser: follows the authorization URL, answers the consent page with `button` (as `user`
    if given), and stops at the redirect back to the client, which it hands to `callback_handler`."""

    def __init__(self, *, user: str | None = None, button: str = "Allow", tamper_state: bool = False) -> None:
        self.user, self.button, self.tamper_state = user, button, tamper_state
        self.opened: list[str] = []
        self.returned: list[str] = []

    async def redirect_handler(self, authorization_url: str) -> None:
        self.opened.append(authorization_url)
        async with httpx.AsyncClient(timeout=10) as http:
            consent = await http.get(authorization_url, follow_redirects=True)
            form = ConsentForm()
            form.feed(consent.text)
            name, value = form.buttons[self.button]
            fields = form.fields | {name: value} | ({"user": self.user} if self.user else {})
            back = await http.post(urljoin(str(consent.url), form.action), data=fields)
        assert back.status_code == 302, back.text
        self.returned.append(back.headers["location"])

    async def callback_handler(self) -> AuthorizationCodeResult:
        query = {name: values[0] for name, values in parse_qs(urlsplit(self.returned[-1]).query).items()}
        if self.tamper_state:
            query["state"] = "not-the-state-that-was-sent"
        return AuthorizationCodeResult(code=query.get("code", ""), state=query.get("state"), iss=query.get("iss"))


def oauth(pair: OAuthPair, storage: MemoryStorage, browser: Browser | None, **handlers: Any) -> OAuthClientProvider:
    """The SDK's client for the protected server, signing in through `browser`, or else `handlers`
    (redirect_handler, callback_handler), or else with none."""
    metadata = OAuthClientMetadata(client_name="toolbridge", redirect_uris=[REDIRECT_URI])  # type: ignore[list-item]
    if browser is not None:
        handlers = {"redirect_handler": browser.redirect_handler, "callback_handler": browser.callback_handler}
    return OAuthClientProvider(pair.mcp_server.mcp_url, metadata, storage, **handlers)


@asynccontextmanager
async def connected(pair: OAuthPair, auth: OAuthClientProvider) -> AsyncIterator[Client]:
    async with (httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(10, read=30)) as http,
                Client(streamable_http_client(pair.mcp_server.mcp_url, http_client=http)) as client):
        yield client


async def whoami(client: Client) -> str:
    result = await client.call_tool("whoami", {})
    assert not result.is_error, result
    return result.content[0].text  # type: ignore[union-attr]


async def wait_past_expiry(auth: OAuthClientProvider) -> None:
    """Until the client's own clock says its access token has expired: a computed, bounded wait. (The server
    counts whole seconds, so it may take the token up to a second longer: never shorter than the client.)"""
    expiry = auth.context.token_expiry_time
    assert expiry is not None and expiry - time.time() < 5
    await anyio.sleep(max(0.0, expiry - time.time()) + 0.1)


def unwrap(error: BaseException) -> BaseException:
    """The one error inside the groups `async with Client(...)` raises."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


async def test_signs_in_with_registration_and_pkce_then_lists_and_calls_the_tools() -> None:
    with OAuthPair.start() as pair:
        storage, browser = MemoryStorage(), Browser()
        with anyio.fail_after(TIMEOUT):
            async with connected(pair, oauth(pair, storage, browser)) as client:
                tools = await client.list_tools()
                assert {tool.name for tool in tools.tools} == {"whoami", "echo"}
                assert await whoami(client) == "alice"
        provider = pair.authorization_server.provider
        [opened] = browser.opened
        sent = parse_qs(urlsplit(opened).query)
        assert opened.startswith(f"{pair.authorization_server.issuer}/authorize?")
        assert sent["code_challenge_method"] == ["S256"] and len(sent["code_challenge"][0]) == 43
        assert sent["resource"] == [pair.mcp_server.mcp_url] and sent["scope"] == [SCOPE]
        assert sent["redirect_uri"] == [REDIRECT_URI] and len(sent["state"][0]) >= 32
        assert provider.authorizations == ["alice"] and provider.resources == [pair.mcp_server.mcp_url]
        assert storage.client_info is not None and list(provider.clients) == [storage.client_info.client_id]
        assert storage.client_info.issuer == pair.authorization_server.issuer  # the SDK binds it (SEP-2352)
        assert storage.tokens is not None and storage.tokens.access_token in provider.access_tokens


async def test_the_server_answers_401_with_where_to_find_its_metadata() -> None:
    with OAuthPair.start() as pair:
        async with httpx.AsyncClient(timeout=10) as http:
            for token in (None, "at-unknown"):
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                answer = await http.post(pair.mcp_server.mcp_url, json={}, headers=headers)
                assert answer.status_code == 401
                challenge = answer.headers["www-authenticate"]
                metadata_url = f"{pair.mcp_server.url}/.well-known/oauth-protected-resource/mcp"
                assert challenge.startswith("Bearer ") and f'resource_metadata="{metadata_url}"' in challenge
            resource = (await http.get(metadata_url)).json()
        assert resource["resource"] == pair.mcp_server.mcp_url
        assert resource["authorization_servers"] == [pair.authorization_server.issuer]


async def test_an_expired_access_token_is_refreshed_without_a_new_sign_in() -> None:
    with OAuthPair.start(access_token_lifetime=2) as pair:
        storage, browser = MemoryStorage(), Browser()
        auth = oauth(pair, storage, browser)
        with anyio.fail_after(TIMEOUT):
            async with connected(pair, auth) as client:
                assert await whoami(client) == "alice"
                before = pair.authorization_server.provider.refreshes
                first = storage.tokens
                await wait_past_expiry(auth)
                assert await whoami(client) == "alice"
        assert pair.authorization_server.provider.refreshes > before
        assert len(browser.opened) == 1
        assert storage.tokens is not None and first is not None
        assert storage.tokens.refresh_token != first.refresh_token  # rotated, and the new one stored


async def test_a_revoked_refresh_token_leads_to_a_new_sign_in() -> None:
    with OAuthPair.start(access_token_lifetime=2) as pair:
        storage, browser = MemoryStorage(), Browser()
        auth = oauth(pair, storage, browser)
        with anyio.fail_after(TIMEOUT):
            async with connected(pair, auth) as client:
                assert await whoami(client) == "alice"
                pair.authorization_server.provider.revoke_refresh_tokens("bob")
                assert pair.authorization_server.provider.refresh_tokens  # someone else's: alice's still works
                pair.authorization_server.provider.revoke_refresh_tokens("alice")
                await wait_past_expiry(auth)
                assert await whoami(client) == "alice"
        assert len(browser.opened) == 2 and pair.authorization_server.provider.authorizations == ["alice", "alice"]


async def test_a_401_for_a_token_the_client_thinks_valid_is_a_new_sign_in_not_a_refresh() -> None:
    # The SDK refreshes only by its own clock; a 401 always means a full authorization (oauth2.py 613, 631).
    with OAuthPair.start() as pair:
        storage, browser = MemoryStorage(), Browser()
        with anyio.fail_after(TIMEOUT):
            async with connected(pair, oauth(pair, storage, browser)) as client:
                assert await whoami(client) == "alice"
                pair.authorization_server.provider.expire_access_tokens()
                assert await whoami(client) == "alice"
        assert len(browser.opened) == 2 and pair.authorization_server.provider.refreshes == 0


async def test_two_people_have_their_own_identities() -> None:
    with OAuthPair.start() as pair:
        with anyio.fail_after(TIMEOUT):
            async with (connected(pair, oauth(pair, MemoryStorage(), Browser(user="alice"))) as alice,
                        connected(pair, oauth(pair, MemoryStorage(), Browser(user="bob"))) as bob):
                assert (await whoami(alice), await whoami(bob)) == ("alice", "bob")
        assert len(pair.authorization_server.provider.clients) == 2


@pytest.mark.parametrize("revokes", [False, True], ids=["counted", "grant revoked"])
async def test_a_spent_refresh_token_presented_again_is_a_reuse(revokes: bool) -> None:
    # RFC 9700 4.14.2: a rotated refresh token seen again means two holders; the server may end the whole grant.
    with OAuthPair.start(reuse_revokes_grant=revokes) as pair:
        storage = MemoryStorage()
        with anyio.fail_after(TIMEOUT):
            async with connected(pair, oauth(pair, storage, Browser())) as client:
                assert await whoami(client) == "alice"
        assert storage.tokens is not None and storage.client_info is not None
        first, client_id = storage.tokens, storage.client_info.client_id
        secret = {"client_secret": storage.client_info.client_secret} if storage.client_info.client_secret else {}

        async def refresh(token: str | None) -> httpx.Response:
            async with httpx.AsyncClient(timeout=10) as http:
                return await http.post(f"{pair.authorization_server.issuer}/token", data={
                    "grant_type": "refresh_token", "refresh_token": token, "client_id": client_id, **secret})

        second = (await refresh(first.refresh_token)).json()
        again = await refresh(first.refresh_token)
        provider = pair.authorization_server.provider
        assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
        assert provider.reuses == 1 and provider.refreshes == 1
        assert (second["access_token"] in provider.access_tokens) is not revokes
        assert (await refresh(second["refresh_token"])).status_code == (400 if revokes else 200)


@pytest.mark.parametrize(("wrong_issuer", "message"), [
    ("metadata", f"Authorization server metadata issuer mismatch: {WRONG_ISSUER} != "),
    ("redirect", f"Authorization response iss mismatch: {WRONG_ISSUER} != "),
])
async def test_the_sdk_rejects_a_wrong_issuer(wrong_issuer: str, message: str) -> None:
    with OAuthPair.start(wrong_issuer=wrong_issuer) as pair:
        storage, browser = MemoryStorage(), Browser()
        with anyio.fail_after(TIMEOUT), pytest.raises(BaseException) as raised:
            async with connected(pair, oauth(pair, storage, browser)) as client:
                await whoami(client)
        error = unwrap(raised.value)
        assert isinstance(error, OAuthFlowError) and str(error).startswith(message), repr(error)
        provider = pair.authorization_server.provider
        assert not provider.access_tokens and storage.tokens is None
        # A wrong metadata issuer stops the flow before registration and any browser; a wrong `iss` after consent.
        assert len(browser.opened) == (0 if wrong_issuer == "metadata" else 1)
        assert len(provider.clients) == (0 if wrong_issuer == "metadata" else 1)


async def test_the_sdk_rejects_a_mismatched_state() -> None:
    with OAuthPair.start() as pair:
        storage = MemoryStorage()
        with anyio.fail_after(TIMEOUT), pytest.raises(BaseException) as raised:
            async with connected(pair, oauth(pair, storage, Browser(tamper_state=True))) as client:
                await whoami(client)
        error = unwrap(raised.value)
        assert isinstance(error, OAuthFlowError) and "State parameter mismatch" in str(error), repr(error)
        assert not pair.authorization_server.provider.access_tokens and storage.tokens is None


class SignInNeeded(Exception):
    """What a gateway's redirect handler may raise to stop the SDK before the browser step."""


async def stop_at_the_browser_step(authorization_url: str) -> None:
    raise SignInNeeded(authorization_url)


async def never_called() -> AuthorizationCodeResult:
    raise AssertionError("the callback handler is never reached when the redirect handler raises")


@pytest.mark.parametrize("stop", ["no redirect handler", "a redirect handler that raises"])
async def test_the_flow_splits_into_a_sign_in_url_now_and_a_code_exchange_later(stop: str) -> None:
    # What a gateway can do when the person is not at its machine: let the SDK discover and register, stop it
    # before the browser step, build the authorization URL itself (keeping state and PKCE verifier), and
    # exchange the code in the callback's request; the SDK then reads the tokens from storage.
    with OAuthPair.start() as pair:
        storage = MemoryStorage()
        raising = {"redirect_handler": stop_at_the_browser_step, "callback_handler": never_called}
        first = oauth(pair, storage, None, **(raising if stop == "a redirect handler that raises" else {}))
        with anyio.fail_after(TIMEOUT), pytest.raises(BaseException) as raised:
            async with connected(pair, first) as client:
                await whoami(client)
        error = unwrap(raised.value)
        if stop == "no redirect handler":
            assert isinstance(error, OAuthFlowError) and "No redirect handler provided" in str(error), repr(error)
        else:  # the handler's own exception comes out as it is, with the SDK's URL (useless: its verifier is lost)
            assert isinstance(error, SignInNeeded) and "code_challenge=" in str(error), repr(error)
        client_info, metadata = storage.client_info, first.context.oauth_metadata
        assert client_info is not None and client_info.client_secret and metadata is not None
        resource = first.context.get_resource_url()
        assert resource == pair.mcp_server.mcp_url

        pkce, state = PKCEParameters.generate(), secrets.token_urlsafe(32)
        browser = Browser()
        await browser.redirect_handler(f"{metadata.authorization_endpoint}?" + urlencode({
            "response_type": "code", "client_id": client_info.client_id, "redirect_uri": REDIRECT_URI,
            "state": state, "code_challenge": pkce.code_challenge, "code_challenge_method": "S256",
            "resource": resource, "scope": SCOPE,
        }))

        returned = await browser.callback_handler()
        assert returned.state == state
        async with httpx.AsyncClient(timeout=10) as http:
            answer = await http.post(str(metadata.token_endpoint), data={
                "grant_type": "authorization_code", "code": returned.code, "redirect_uri": REDIRECT_URI,
                "client_id": client_info.client_id, "client_secret": client_info.client_secret,
                "code_verifier": pkce.code_verifier, "resource": resource,
            })
        assert answer.status_code == 200, answer.text
        await storage.set_tokens(OAuthToken.model_validate(answer.json()))
        with anyio.fail_after(TIMEOUT):
            async with connected(pair, oauth(pair, storage, None)) as client:
                assert await whoami(client) == "alice"


async def test_after_a_restart_the_sdk_refreshes_only_when_given_the_expiry_and_the_metadata() -> None:
    # TokenStorage keeps neither the expiry time nor the authorization server's metadata (oauth2.py 556-560).
    with OAuthPair.start(access_token_lifetime=2) as pair:
        provider = pair.authorization_server.provider
        storage, browser = MemoryStorage(), Browser()
        with anyio.fail_after(TIMEOUT):
            before = oauth(pair, storage, browser)
            async with connected(pair, before) as client:
                assert await whoami(client) == "alice"
            await wait_past_expiry(before)
            provider.expire_access_tokens()  # the server's whole-second clock may not have got there yet

            # Told nothing: the expired token goes out as if valid, the 401 that follows means a new sign-in.
            naive = oauth(pair, storage, browser)
            async with connected(pair, naive) as client:
                assert await whoami(client) == "alice"
            assert len(browser.opened) == 2
            await wait_past_expiry(naive)
            provider.expire_access_tokens()

            # Told the expiry only: it refreshes at the MCP server's origin (`/token`, 404), then signs in again.
            refreshes = provider.refreshes
            expiry_only = oauth(pair, storage, browser)
            expiry_only.context.token_expiry_time = naive.context.token_expiry_time
            async with connected(pair, expiry_only) as client:
                assert await whoami(client) == "alice"
            assert len(browser.opened) == 3 and provider.refreshes == refreshes
            await wait_past_expiry(expiry_only)
            provider.expire_access_tokens()

            # Told both (OAuthContext fields, set before the first request): a refresh, no sign-in.
            told = oauth(pair, storage, browser)
            told.context.token_expiry_time = expiry_only.context.token_expiry_time
            told.context.oauth_metadata = OAuthMetadata.model_validate(expiry_only.context.oauth_metadata)
            async with connected(pair, told) as client:
                assert await whoami(client) == "alice"
        assert len(browser.opened) == 3 and provider.refreshes == refreshes + 1
