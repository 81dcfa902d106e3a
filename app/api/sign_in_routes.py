"""The person's sign-in to an MCP server that asks for OAuth, in their browser (app/mcp/sign_in.py does it).

`GET /ui/servers/{name}/sign-in` is where the status page's "Sign in" button (a plain link) and a chat's sign-in
link lead: behind the key, as every /ui route, and only for a server the key may use; it redirects the browser
to the server's authorization server. That one sends the browser back to `GET /oauth/callback`, which takes no
key (a browser coming back from another site sends none it can be trusted to): the unguessable, single-use
`state` the sign-in made is the capability, as an image's id is. It ends on the status page, once the server's
connection with the new sign-in is up (bounded). `POST /ui/servers/{name}/sign-out` forgets the tokens and
reconnects the server, which then waits for a sign-in again. A server without `per_key` has one sign-in that
every key acts as: only a key that may change it (app/access/scope.py) starts or ends it; others get a 403 that
says who may. Failures at a browser's navigation are a small page with the reason and the way back, never a token.
"""

import html
import secrets
from typing import Any
from urllib.parse import quote

import anyio
from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from app.access import CALLER_CHARS, key_digest
from app.api.deps import KeyScopeDep, PoolDep, SettingsDep, ViewDep, presented_key
from app.mcp import (
    SIGN_IN_SECONDS,
    KeyView,
    ServerAuth,
    SignInFailed,
    SignInUnavailable,
    finish_sign_in,
    start_sign_in,
)
from app.openai.errors import Forbidden, RouteNotFound
from app.settings import Settings

router = APIRouter(include_in_schema=False)
CALLBACK = "/oauth/callback"
SIGN_OUT_SETTLES = 5.0  # seconds a sign-out waits for its server to stop (it takes milliseconds)
SIGN_IN_SETTLES = 10.0  # seconds the way back waits for the new sign-in's connection (it takes a second or so)
BROWSER_COOKIE = "toolbridge_sign_in"  # ties the way back to the browser that started (sign_in.py `start`)
# The authorization URL and the code in the callback's are nobody else's business: no cache, no referrer.
_REDIRECT_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
_PAGE_HEADERS = {"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
                 "Cache-Control": "no-store", "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff"}


def callback_url(settings: Settings, request: Request) -> str:
    """Where the authorization server sends the browser back: TOOLBRIDGE_PUBLIC_URL's, or the address the
    browser used (Host is checked by the guard). Register this URL with a server whose client you register."""
    base = settings.server.public_url or str(request.base_url)
    return base.rstrip("/") + CALLBACK


@router.get("/ui/servers/{name}/sign-in")
async def sign_in(name: str, request: Request, pool: ViewDep, settings: SettingsDep, scope: KeyScopeDep) -> Response:
    auth = _auth(pool, name)
    browser = secrets.token_urlsafe(32)
    # Whose pending sign-in it is, for their bound: the key's digest (each operator key its own), "" without keys.
    presented = presented_key(request)
    owner = scope.caller or (key_digest(presented)[:CALLER_CHARS] if presented else "")
    try:
        url = await start_sign_in(auth, callback_url(settings, request), owner, browser)
    except (SignInFailed, SignInUnavailable) as exc:
        return _page("Sign-in not started", str(exc), 502 if isinstance(exc, SignInFailed) else 503)
    redirect = RedirectResponse(url, status_code=303, headers=_REDIRECT_HEADERS)
    # Lax: sent on the authorization server's redirect back (a top-level GET), never by another site's requests.
    redirect.set_cookie(BROWSER_COOKIE, browser, max_age=SIGN_IN_SECONDS, path=CALLBACK, httponly=True,
                        samesite="lax", secure=url_is_https(callback_url(settings, request)))
    return redirect


@router.get(CALLBACK)
async def callback(request: Request, pool: PoolDep, state: str = "", code: str | None = None, iss: str | None = None,
                   error: str | None = None) -> Response:
    vault = pool.sign_ins.vault
    if vault is None:
        return _page("Sign-in not finished", str(SignInUnavailable("?")), 503)
    try:
        auth = await finish_sign_in(vault, pool.sign_ins.find, state, code, iss, error,
                                    request.cookies.get(BROWSER_COOKIE, ""))
    except SignInFailed as exc:
        return _forget_browser(_page("Sign-in not finished", str(exc), 400))
    # The page it lands on, and a chat right after, find the server ready with the new sign-in.
    with anyio.move_on_after(SIGN_IN_SETTLES):
        await auth.connected()
    return _forget_browser(RedirectResponse(f"/?signed_in={quote(auth.name)}", status_code=303,
                                            headers=_REDIRECT_HEADERS))


@router.post("/ui/servers/{name}/sign-out")
async def sign_out(name: str, pool: ViewDep) -> dict[str, Any]:
    auth = _auth(pool, name)
    await auth.forget()
    pool.restart(name)  # the live connection ends; the next one finds no tokens and waits for a sign-in
    # Answered once it waits (bounded): the page reads the servers next, and would show "restarting" for good.
    with anyio.move_on_after(SIGN_OUT_SETTLES):
        await pool.pool.wait_for(name, lambda status: status["state"] not in ("ready", "restarting"))
    return {"server": name, "signed_in": False}


def url_is_https(url: str) -> bool:
    return url.startswith("https://")


def _forget_browser(response: Response) -> Response:
    response.delete_cookie(BROWSER_COOKIE, path=CALLBACK)
    return response


def _auth(pool: KeyView, name: str) -> ServerAuth:
    auth = pool.pool.sign_ins.find(name) if pool.scope.may_use_server(name) else None
    if auth is None or not auth.person_signs_in:
        raise RouteNotFound(f"There is no MCP server '{name}' to sign in to.", code="server_not_found")
    if not pool.may_sign_in(name):
        raise Forbidden(f"MCP server '{name}' has one sign-in, which every key's calls act as: signing it in or out "
                        "is for the operator's keys (TOOLBRIDGE_API_KEYS) or keys the keys file gives \"sign_in\".",
                        code="sign_in_not_allowed")
    return auth.of_caller()  # a `per_key` server: the caller's key's own sign-in


def _page(title: str, message: str, status: int) -> Response:
    body = (f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title>"
            f"<body style='font:16px system-ui;max-width:40em;margin:3em auto'><h1>{html.escape(title)}</h1>"
            f"<p>{html.escape(message)}</p><p><a href='/'>Back to the status page</a></p>")
    return HTMLResponse(body, status_code=status, headers=_PAGE_HEADERS)
