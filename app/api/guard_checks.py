"""The guards' pure checks (app/api/guard.py): a Host header's name, loopback names, which origins may change
things, a POST's content type, HTTP Basic credentials. Strings in, a verdict out: tested by tables."""

import base64
import ipaddress

from app.openai.errors import BodyTooLarge, GatewayError, InvalidRequest

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
