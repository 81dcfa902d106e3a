"""An error in Anthropic's shape: its clients raise their typed errors from `error.type`."""

from app.doors.messages.wire import ErrorEvent
from app.openai.errors import GatewayError
from app.openai.wire import JSONObject

# Anthropic's error types by HTTP status (docs.anthropic.com, "Errors"); any other status is an `api_error`.
_ANTHROPIC_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
    405: "invalid_request_error", 408: "timeout_error", 413: "request_too_large", 415: "invalid_request_error",
    429: "rate_limit_error", 503: "overloaded_error", 529: "overloaded_error",
}


def anthropic_error(error: GatewayError) -> ErrorEvent:
    """`{"type": "error", "error": {"type", "message"}}`, as Anthropic's API answers (and streams) a failure."""
    return {"type": "error", "error": {"type": _anthropic_type(error), "message": error.message}}


def anthropic_error_body(error: GatewayError) -> JSONObject:
    """anthropic_error as the body of an error response (the door's error shape: JSON, as every door's)."""
    return {"type": "error", "error": {"type": _anthropic_type(error), "message": error.message}}


def _anthropic_type(error: GatewayError) -> str:
    return _ANTHROPIC_TYPES.get(error.status_code, "api_error")
