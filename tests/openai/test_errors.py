"""The gateway's errors: which ones tell the client that asking again cannot help (`x-should-retry: false`)."""

import pytest

from app.openai.errors import (
    AuthenticationFailed,
    BodyTooLarge,
    Conflict,
    Forbidden,
    GatewayError,
    InvalidRequest,
    MethodNotAllowed,
    Overloaded,
    RequestTimeout,
    RouteNotFound,
    UpstreamClosed,
    UpstreamCutOff,
    UpstreamError,
    UpstreamStatusError,
    UpstreamTimeout,
    UpstreamUnreachable,
)

URL = "http://127.0.0.1:1234/v1"


@pytest.mark.parametrize(
    ("error", "retried"),
    [
        (InvalidRequest("bad"), False),
        (MethodNotAllowed("PUT", "/v1/messages", "POST"), False),
        (BodyTooLarge("big"), False),
        (Conflict("taken"), False),
        (AuthenticationFailed("Incorrect API key."), False),
        (Forbidden("no"), False),
        (RouteNotFound("none"), False),
        (UpstreamUnreachable(URL), False),
        (UpstreamStatusError(400, b'{"error": {"message": "context too long"}}'), False),
        (UpstreamStatusError(404, b'{"error": "no such model"}'), False),
        # What another try may get past keeps the clients' own retries.
        (RequestTimeout("slow body"), True),
        (Overloaded("busy", headers={"Retry-After": "1"}), True),
        (UpstreamStatusError(429, b"slow down", retry_after="2"), True),
        (UpstreamStatusError(408, b"timeout"), True),
        (UpstreamStatusError(503, b"loading model"), True),
        (UpstreamTimeout(URL, 600), True),
        (UpstreamClosed(URL), True),
        (UpstreamCutOff("closed the connection", "3 characters of the answer"), True),
        (UpstreamError("The model server answered 500."), True),
        (GatewayError("Internal gateway error."), True),
    ],
)
def test_an_error_a_retry_cannot_fix_says_so_and_the_others_keep_their_retries(
    error: GatewayError, retried: bool
) -> None:
    headers = error.response_headers()
    assert headers.get("x-should-retry") == (None if retried else "false")
    assert {k: v for k, v in headers.items() if k != "x-should-retry"} == error.headers  # Retry-After and the rest stay
