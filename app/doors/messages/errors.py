"""An error in Anthropic's shape: its clients raise their typed errors from `error.type`."""

from typing import Any

from app.openai.errors import GatewayError

# Anthropic's error types by HTTP status (docs.anthropic.com, "Errors"); any other status is an `api_error`.
_ANTHROPIC_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
    405: "invalid_request_error", 408: "timeout_error", 413: "request_too_large", 415: "invalid_request_error",
    429: "rate_limit_error", 503: "overloaded_error", 529: "overloaded_error",
}


def anthropic_error(error: GatewayError) -> dict[str, Any]:
    """`{"type": "error", "error": {"type", "message"}}`, as Anthropic's API answers (and streams) a failure."""
    kind = _ANTHROPIC_TYPES.get(error.status_code, "api_error")
    return {"type": "error", "error": {"type": kind, "message": error.message}}
