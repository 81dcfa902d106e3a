"""The gateway's exceptions and their one mapping to the OpenAI error envelope.

GatewayError                      -> 500 server_error
├── InvalidRequest                -> 400 invalid_request_error (bad JSON, failed validation)
│   ├── MethodNotAllowed          -> 405 (with Allow)
│   ├── RequestTimeout            -> 408 (a client that stopped sending its body)
│   └── BodyTooLarge              -> 413
├── AuthenticationFailed          -> 401 authentication_error
├── Forbidden                     -> 403 permission_error (a Host or Origin that is not allowed)
├── RouteNotFound                 -> 404 not_found_error
├── ClientLeft                    -> 499 (the client hung up first: only the log and the metrics see it)
├── Overloaded                    -> 503 server_error (with Retry-After)
└── UpstreamError                 -> 502 upstream_error
    ├── UpstreamUnreachable       -> 502 (names the URL and how to fix it)
    ├── UpstreamClosed            -> 502 (it took the connection, then closed it or answered what is not HTTP)
    ├── UpstreamCutOff            -> 502 (an answer that broke off after it began: how much had arrived)
    ├── UpstreamTimeout           -> 504
    └── UpstreamStatusError       -> the upstream's own status and message

A failing MCP tool is not an exception here: it becomes a tool result the model reads.

Each error says whether asking again can help (`retry_helps`). Where it cannot (a wrong key, a bad request, a model
server that is not running), the answer carries `x-should-retry: false`, which the Stainless SDKs (openai,
anthropic) and Claude Code obey: the person reads the cause at once instead of after minutes of retries (Claude
Code retries a 502 or a 401 ten times). Overloaded (429/503) and a timeout keep their usual retries.
"""

import html
import json
import re
from typing import TypedDict

from app.openai.wire import JSONValue

# An upstream error message is shown to the client: at most this much of it.
SHOULD_RETRY = "x-should-retry"
# The upstream's own 4xx that another try may get past: a request timeout, a conflict, a rate limit.
_UPSTREAM_RETRIED = frozenset({408, 409, 429})
UPSTREAM_MESSAGE_CHARS = 500
_TAG = re.compile(r"</?[a-zA-Z!?][^<>]*>")
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_INVISIBLE = re.compile(r"<(script|style|head)[^>]*>.*?</\1>", re.IGNORECASE | re.DOTALL)


class ErrorObject(TypedDict):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorEnvelope(TypedDict):
    """The OpenAI error body."""

    error: ErrorObject


class GatewayError(Exception):
    """Base of every error the gateway reports to a client."""

    status_code = 500
    error_type = "server_error"
    default_code: str | None = "internal_error"
    retry_helps = True  # unknown failures may pass

    def __init__(
        self, message: str, *, param: str | None = None, code: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        # A message may quote the client's text, which Python's JSON parser read with lone surrogates: as
        # escapes, so that the error body (and the log line) can be written at all.
        message = message.encode("utf-8", "backslashreplace").decode("utf-8")
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code if code is not None else self.default_code
        self.headers = headers or {}

    def response_headers(self) -> dict[str, str]:
        """The headers the error's answer carries: its own, and `x-should-retry: false` where a retry cannot help."""
        return self.headers if self.retry_helps else {**self.headers, SHOULD_RETRY: "false"}

    def envelope(self) -> ErrorEnvelope:
        """The OpenAI error body: `{"error": {"message", "type", "param", "code"}}`."""
        return error_envelope(self.message, self.error_type, param=self.param, code=self.code)


class InvalidRequest(GatewayError):
    status_code = 400
    error_type = "invalid_request_error"
    default_code = "invalid_request"
    retry_helps = False


class MethodNotAllowed(InvalidRequest):
    status_code = 405
    default_code = "method_not_allowed"

    def __init__(self, method: str, path: str, allowed: str) -> None:
        super().__init__(f"{method} is not allowed on {path}; use {allowed}.", headers={"Allow": allowed})


class Conflict(InvalidRequest):
    status_code = 409
    default_code = "conflict"


class RequestTimeout(InvalidRequest):
    status_code = 408
    default_code = "request_timeout"
    retry_helps = True  # the body was slow this time


class BodyTooLarge(InvalidRequest):
    status_code = 413
    default_code = "request_too_large"


class Forbidden(GatewayError):
    status_code = 403
    error_type = "permission_error"
    default_code = "forbidden"
    retry_helps = False


class Overloaded(GatewayError):
    status_code = 503
    default_code = "overloaded"


class ClientLeft(GatewayError):
    status_code = 499  # nginx's status for "the client went away first"
    default_code = "client_closed_request"

    def __init__(self) -> None:
        super().__init__("The client closed the connection before the answer was ready.")


class AuthenticationFailed(GatewayError):
    status_code = 401
    error_type = "authentication_error"
    default_code = "invalid_api_key"
    retry_helps = False


class RouteNotFound(GatewayError):
    status_code = 404
    error_type = "not_found_error"
    default_code = "not_found"
    retry_helps = False


class UpstreamError(GatewayError):
    status_code = 502
    error_type = "upstream_error"
    default_code = "upstream_error"


class UpstreamUnreachable(UpstreamError):
    default_code = "upstream_unreachable"
    # Nothing listens at the URL: until a person starts the server, every retry meets the same refusal.
    retry_helps = False

    def __init__(self, url: str) -> None:
        super().__init__(
            f"Cannot reach the upstream model server at {url}. Start LM Studio's local server "
            "(Developer tab -> Start Server) or another OpenAI-compatible server, or point "
            "TOOLBRIDGE_UPSTREAM_URL at the one you run."
        )


class UpstreamClosed(UpstreamError):
    """A server listens at the URL but gave no answer: it closed the connection (crashed, restarted, refused
    the request) or answered what is not HTTP. Telling its user to start a server would mislead them."""

    default_code = "upstream_closed"

    def __init__(self, url: str, what: str = "closed the connection without answering") -> None:
        super().__init__(f"The upstream model server at {url} {what}; its own log should say why.")


class UpstreamCutOff(UpstreamError):
    """An answer that broke off after it began: the model server closed the connection (it crashed or was
    stopped), sent what is not HTTP, or ended its stream unfinished. How much had arrived tells the user
    whether it was the server failing at once or mid-answer. A streamed answer gets it as its error event."""

    default_code = "upstream_cut_off"

    def __init__(self, what: str, received: str) -> None:
        super().__init__(f"The answer broke off: the model server {what} after {received}; its own log should "
                         "say why.")


class UpstreamTimeout(UpstreamError):
    status_code = 504
    default_code = "upstream_timeout"

    def __init__(self, url: str, seconds: float) -> None:
        super().__init__(
            f"The upstream at {url} did not answer within {seconds:g} s. "
            "Raise TOOLBRIDGE_UPSTREAM_TIMEOUT if the model is slow to load."
        )


class UpstreamStatusError(UpstreamError):
    """The upstream answered with an error status; its message and, for 4xx, its status pass through."""

    def __init__(self, status: int, body: bytes, *, retry_after: str | None = None) -> None:
        message, error_type, param, code = _parse_upstream_error(body)
        super().__init__(
            f"Upstream error: {message}" if status >= 500 else message,
            param=param,
            code=code,
            headers={"Retry-After": retry_after} if retry_after else None,
        )
        self.upstream_status = status
        self.status_code = status if 400 <= status < 500 else 502
        self.retry_helps = not 400 <= status < 500 or status in _UPSTREAM_RETRIED
        self.error_type = error_type or ("invalid_request_error" if status < 500 else "upstream_error")


def error_envelope(
    message: str, error_type: str, *, param: str | None = None, code: str | None = None
) -> ErrorEnvelope:
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


def _parse_upstream_error(body: bytes) -> tuple[str, str | None, str | None, str | None]:
    """Reads the upstream's error message, whatever shape it came in (OpenAI envelope, bare string, text)."""
    text = body.decode("utf-8", "replace").strip()
    try:
        payload = json.loads(text)
    except ValueError:
        return _plain(text) or "(empty response)", None, None, None
    error = payload.get("error", payload) if isinstance(payload, dict) else payload
    if isinstance(error, str):
        return upstream_message(error), None, None, None
    if isinstance(error, dict):
        code = error.get("code")
        return (
            upstream_message(error),
            error.get("type") if isinstance(error.get("type"), str) else None,
            error.get("param") if isinstance(error.get("param"), str) else None,
            str(code) if code is not None else None,
        )
    return _plain(text), None, None, None


def upstream_message(error: JSONValue) -> str:
    """An upstream's error as words: an OpenAI error object's message (or detail), a bare string, an HTML page's
    title; bounded. For error bodies and for errors sent inside a stream alike."""
    if isinstance(error, dict):
        return _plain(str(error.get("message") or error.get("detail") or json.dumps(error)))
    return _plain(str(error))


def _plain(message: str) -> str:
    """An upstream's message as words: an HTML error page becomes its title (or its text), bounded."""
    if _TAG.search(message):
        title = _TITLE.search(message)
        message = title.group(1) if title else _TAG.sub(" ", _INVISIBLE.sub(" ", message))
        message = html.unescape(message)
    message = " ".join(message.split())
    return message if len(message) <= UPSTREAM_MESSAGE_CHARS else message[: UPSTREAM_MESSAGE_CHARS - 1] + "…"
