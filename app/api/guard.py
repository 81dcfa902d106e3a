"""What a request must pass before any route sees it, as two pure ASGI middlewares.

`BrowserGuard` (outermost) refuses what only a hostile web page sends: a Host header that is not this
gateway's (DNS rebinding: a page on evil.example whose name now points at 127.0.0.1 is same-origin with
the gateway), an http(s) Origin other than loopback or a listed one, and, on a request that changes
something (any method but GET, HEAD, OPTIONS), a scheme no desktop app uses, or on the status page the
opaque origin `null` of sandboxed frames and local files. Desktop apps (`app://`, `file://`, `tauri://`,
`null`...) and non-browser clients (no Origin) pass. Listed origins then get CORS headers from Starlette's
CORSMiddleware, which sits between the two guards.

`AdmissionGuard` checks, cheapest first and before a byte of the body is read: the API key (TOOLBRIDGE_API_KEYS or
the keys file, app/access/; what the key may use is left in the request's state for the routes), that a POST
is declared JSON, the declared body size, the number of requests in flight. The images in answers
(`/images/{id}`) take their unguessable id in place of the key, which a page's `<img>` cannot send. The
status page (`/`, `/ui/...`) also takes the key as the password of HTTP Basic credentials, and its refusal
asks the browser for them.
While the body arrives it bounds its size and the time it may take in all.

A POST must say `Content-Type: application/json` (or carry a bearer key): that is what a browser cannot send
to another origin without asking it first (a CORS preflight, which only listed origins pass), whereas a
`text/plain` form or a `no-cors` fetch from any page is sent without asking. The status streams
(`/ui/events`) live as long as the page is open: they have their own small bound, not the requests' slots.

The checks that need only strings (Host, Origin, content type, declared size, Basic credentials) are pure
functions below the constants: strings in, a verdict out, tested by tables.
"""

import asyncio
import base64
import ipaddress
from typing import NoReturn
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.access import CURRENT_SCOPE, EVERYTHING, NOBODY, KeyRing, KeyScope, presented_key
from app.access.presented import ANTHROPIC_KEY_HEADER
from app.chat import IMAGES_ROUTE
from app.doors.door import door_for
from app.openai.errors import (
    AuthenticationFailed,
    BodyTooLarge,
    Forbidden,
    GatewayError,
    InvalidRequest,
    Overloaded,
    RequestTimeout,
)
from app.settings import ServerSettings, Settings

# Served without a key: the health check of Docker and load balancers (it shows only the status then).
PUBLIC_PATHS = frozenset({"/health"})
# Served to whoever has the unguessable id in the path instead of the key, which an <img> cannot send: the images
# in answers (app/chat/answer/images.py). Host and Origin are checked all the same.
# The same for the way back from an OAuth sign-in, whose single-use `state` is the capability (sign_in_routes.py).
CAPABILITY_PATHS = (f"/{IMAGES_ROUTE}", "/oauth/callback")
BODY_FAILURE = "toolbridge.body_failure"  # scope key: why the body could not be read, for the error handler
OVERLOADED_RETRY_AFTER = "1"
STATUS_STREAMS = frozenset({"/ui/events"})  # open as long as a status page is: bounded apart from requests
MAX_STATUS_STREAMS = 16


# ---------------------------------------------------------------- the pure checks

# Methods that change nothing here; a request with any other may change something.
READ_ONLY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Origins desktop apps and browser extensions send (Electron: file:// or a custom app://; Tauri: tauri://).
# A web page never has one of these; it has an http(s) origin or the opaque `null`.
DESKTOP_SCHEMES = frozenset({"app", "file", "tauri", "vscode-webview", "chrome-extension", "moz-extension",
                             "safari-web-extension", "capacitor"})
_ANY_ADDRESS = frozenset({"", "0.0.0.0", "::", "[::]"})


def may_change_things(origin: str, on_the_page: bool) -> bool:
    """Whether a request from `origin` may change something. http(s) origins were checked already; desktop
    apps' schemes may; unknown schemes may not. The opaque `null` (sandboxed frames, local files) may not on
    the status page, which no app uses; on the API it is what some desktop apps send, and a page's request
    must be JSON there, which a browser sends from `null` only when a CORS preflight allowed it."""
    if origin.strip() == "null":
        return not on_the_page
    scheme, colon, _ = origin.strip().partition(":")
    return bool(colon) and scheme.lower() in DESKTOP_SCHEMES | {"http", "https"}


def content_type_refusal(
    content_type: str | None, authorization: str, x_api_key: str | None = None
) -> GatewayError | None:
    """None for a POST declared JSON, or sent with a bearer key or an `x-api-key` header (a browser page can send
    neither to another origin without a preflight; SDKs upload files as multipart with their key); else why not."""
    if content_type is not None and is_json(content_type):
        return None
    if authorization[:7].lower() == "bearer " or x_api_key is not None:
        return None
    return InvalidRequest(
        "The request body must be JSON: send the header 'Content-Type: application/json' (also on a POST "
        "without a body).",
        code="invalid_content_type",
    )


def is_json(content_type: str) -> bool:
    """application/json or application/*+json, with any parameters."""
    media_type = content_type.partition(";")[0].strip().lower()
    return media_type == "application/json" or (media_type.startswith("application/") and media_type.endswith("+json"))


def declared_too_large(content_length: str | None, max_body: int) -> bool:
    """Whether a Content-Length header declares more than `max_body` bytes. ASCII digits only, as HTTP
    writes them: "²" passes isdigit() and then fails int()."""
    return content_length is not None and content_length.isascii() and content_length.isdigit() \
        and int(content_length) > max_body


def for_the_page(path: str) -> bool:
    return path == "/" or path.startswith("/ui/")


def basic_password(credentials: str) -> str:
    """The password of HTTP Basic credentials (user:password, base64), or "" when they are malformed."""
    try:
        decoded = base64.b64decode(credentials, validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return ""
    _user, colon, password = decoded.partition(":")
    return password if colon else ""


def is_loopback(name: str) -> bool:
    """localhost, *.localhost (RFC 6761: always loopback, nobody can own it), or a loopback address."""
    name = name.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(host: str) -> str:
    """The name of a Host header, without its port: `[::1]:8000` -> `::1`, `Example.com:80` -> `example.com`."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def bind_address(host: str) -> frozenset[str]:
    """The address the gateway was told to listen on, as a Host name it answers to; none for any address."""
    return frozenset() if host in _ANY_ADDRESS else frozenset({host.lower().strip("[]")})


def too_large(limit: int) -> BodyTooLarge:
    return BodyTooLarge(f"The request body is larger than {limit} bytes (TOOLBRIDGE_MAX_BODY_BYTES).")


# ---------------------------------------------------------------- the middlewares


class BrowserGuard:
    def __init__(self, app: ASGIApp, settings: ServerSettings) -> None:
        self.app = app
        self._hosts = settings.host_names | bind_address(settings.host)
        self._origins = frozenset(settings.browser_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            change = scope["method"] not in READ_ONLY_METHODS
            page_change = change and for_the_page(scope["path"])
            refusal = self._refusal(headers.get("host"), headers.get("origin"), page_change, change)
            if refusal is not None:
                await reply(refusal, scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refusal(self, host: str | None, origin: str | None, page_change: bool, change: bool) -> GatewayError | None:
        """Why not, or None. `change`: the request may change something; `page_change`: on the status page."""
        if host is not None and not self._host_allowed(host_name(host)):
            return Forbidden(
                f"Host '{host}' is not served here. Add it to TOOLBRIDGE_ALLOWED_HOSTS if you reach the gateway "
                "by that name.",
                code="host_not_allowed",
            )
        if origin is not None and not self._origin_allowed(origin):
            return Forbidden(
                f"Requests from web pages at {origin} are not allowed. Add the origin to TOOLBRIDGE_CORS_ORIGINS "
                "to let that web app use the gateway.",
                code="origin_not_allowed",
            )
        if origin is not None and change and not may_change_things(origin, page_change):
            return Forbidden(
                f"Requests from the origin '{origin[:100]}' (a sandboxed frame, a local file or an unknown app) may "
                "not change anything here.",
                code="origin_not_allowed",
            )
        return None

    def _host_allowed(self, name: str) -> bool:
        return "*" in self._hosts or name in self._hosts or is_loopback(name)

    def _origin_allowed(self, origin: str) -> bool:
        parts = urlsplit(origin.strip())
        if parts.scheme not in ("http", "https"):  # app://, file://: desktop apps; null: may only read (see above)
            return True
        return "*" in self._origins or origin.rstrip("/") in self._origins or is_loopback(parts.hostname or "")


class AdmissionGuard:
    def __init__(self, app: ASGIApp, settings: Settings, keys: KeyRing) -> None:
        self.app = app
        self._keys = keys
        self._public = PUBLIC_PATHS | ({"/metrics"} if settings.access.metrics_public else set())
        self._max_body = settings.server.max_body_bytes
        self._body_timeout = settings.server.client_timeout
        self._max_in_flight = settings.server.max_concurrent_requests
        self.in_flight = 0
        self.status_streams = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        page = for_the_page(scope["path"])
        admitted = self._admitted(headers, basic=page)
        authorised = admitted if isinstance(admitted, GatewayError) else None
        key_scope = admitted if isinstance(admitted, KeyScope) else NOBODY
        scope.setdefault("state", {}).update(authorised=authorised is None, key_scope=key_scope)
        path = scope["path"]
        stream = path in STATUS_STREAMS
        counted = not stream and path not in PUBLIC_PATHS and path != "/metrics"
        refusal = None if path in self._public or path.startswith(CAPABILITY_PATHS) else authorised
        if refusal is None and scope["method"] == "POST":
            refusal = content_type_refusal(headers.get("content-type"), headers.get("authorization", ""),
                                           headers.get(ANTHROPIC_KEY_HEADER))
        if refusal is None:
            refusal = self._size_refusal(headers.get("content-length"))
        if refusal is None:
            refusal = self._capacity_refusal(counted, stream)
        if refusal is not None:
            if page and isinstance(refusal, AuthenticationFailed):  # the browser asks for the key, once
                refusal.headers["WWW-Authenticate"] = 'Basic realm="toolbridge", charset="UTF-8"'
            await reply(refusal, scope, receive, send)
            return
        self.in_flight += counted
        self.status_streams += stream
        token = CURRENT_SCOPE.set(key_scope)
        try:
            await self.app(scope, _BoundedBody(scope, receive, self._max_body, self._body_timeout), send)
        finally:
            CURRENT_SCOPE.reset(token)
            self.in_flight -= counted
            self.status_streams -= stream

    def _capacity_refusal(self, counted: bool, stream: bool) -> GatewayError | None:
        if counted and self.in_flight >= self._max_in_flight:
            return Overloaded(
                f"The gateway is handling {self.in_flight} requests, its limit (TOOLBRIDGE_MAX_CONCURRENT_REQUESTS); "
                "try again shortly.",
                headers={"Retry-After": OVERLOADED_RETRY_AFTER},
            )
        if stream and self.status_streams >= MAX_STATUS_STREAMS:
            return Overloaded(
                f"{self.status_streams} status pages are open, the most the gateway serves at once; close one.",
                headers={"Retry-After": OVERLOADED_RETRY_AFTER},
            )
        return None

    def _admitted(self, headers: Headers, basic: bool = False) -> KeyScope | GatewayError:
        """What the caller's key may use (everything when the gateway has no keys); else why it is refused. The
        key comes as a bearer, or as `x-api-key` (Anthropic's clients). With `basic` (the status page), HTTP Basic
        credentials with the key as password count too: a browser can send nothing else by itself."""
        if not self._keys.required:
            return EVERYTHING
        scheme, _, credentials = headers.get("authorization", "").partition(" ")
        page_login = basic and scheme.lower() == "basic"
        presented = basic_password(credentials.strip()) if page_login else presented_key(headers)
        if not presented:
            return AuthenticationFailed("Missing API key: send 'Authorization: Bearer <key>' (or 'x-api-key: <key>').")
        found = self._keys.scope_of(presented)
        return AuthenticationFailed("Incorrect API key.") if found is None else found

    def _size_refusal(self, content_length: str | None) -> GatewayError | None:
        return too_large(self._max_body) if declared_too_large(content_length, self._max_body) else None


class _BoundedBody:
    """The request's `receive`, bounded while the body arrives: its size, and the time for all of it (a
    deadline per part let a client dripping a byte now and then hold a request slot for ever).
    Once the body is complete it is the plain `receive` (routes wait on it for the client's disconnect).

    A failure is raised as Starlette's HTTPException, which FastAPI lets through its body parsing to the
    error handler; it is also left in the scope for the error handler, where a route that streams the
    body on (the pass-through) meets it wrapped in another error."""

    def __init__(self, scope: Scope, receive: Receive, max_body: int, timeout: float) -> None:
        self._scope, self._receive = scope, receive
        self._max_body, self._timeout = max_body, timeout
        self._received = 0
        self._complete = False
        self._deadline = asyncio.get_running_loop().time() + timeout  # from the end of the head

    async def __call__(self) -> Message:
        if self._complete:
            return await self._receive()
        try:
            async with asyncio.timeout_at(self._deadline):  # half the cost of anyio's move_on_after
                message = await self._receive()
        except TimeoutError:
            self._fail(RequestTimeout(f"The request body did not arrive within {self._timeout:g} s."))
        if message["type"] != "http.request":
            self._complete = True
            return message
        self._received += len(message.get("body", b""))
        if self._received > self._max_body:
            self._fail(too_large(self._max_body))
        self._complete = not message.get("more_body", False)
        return message

    def _fail(self, error: GatewayError) -> NoReturn:
        self._scope[BODY_FAILURE] = error
        raise HTTPException(error.status_code, error.message)


async def reply(error: GatewayError, scope: Scope, receive: Receive, send: Send) -> None:
    """Answers with the error's envelope, without reading the body."""
    body = door_for(scope["app"].state.doors, scope["path"]).error_body(error)  # in the shape of the path's door
    await JSONResponse(body, error.status_code,
                       headers=error.response_headers())(scope, receive, send)
