"""Which door a path is, and an error in the wire format of the door it happened at: every door's clients read
their own shape (the Anthropic SDK raises its typed errors from `error.type`, Ollama's library reads `error` as a
string)."""

from typing import Any

from app.openai.errors import GatewayError

RESPONSES_PATH = "/v1/responses"
MESSAGES_PATH = "/v1/messages"
OLLAMA_PREFIX = "/api/"

# Anthropic's error types by HTTP status (docs.anthropic.com, "Errors"); any other status is an `api_error`.
_ANTHROPIC_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
    405: "invalid_request_error", 408: "timeout_error", 413: "request_too_large", 415: "invalid_request_error",
    429: "rate_limit_error", 503: "overloaded_error", 529: "overloaded_error",
}


def door_of(path: str) -> str:
    """Which door a path is: "responses", "messages", "ollama", or "chat" (Chat Completions, and the rest)."""
    if path == RESPONSES_PATH or path.startswith(f"{RESPONSES_PATH}/"):
        return "responses"
    if path == MESSAGES_PATH or path.startswith(f"{MESSAGES_PATH}/"):
        return "messages"
    return "ollama" if path.startswith(OLLAMA_PREFIX) else "chat"


def error_body(path: str, error: GatewayError) -> dict[str, Any]:
    """The body that tells the client of `path` about `error`."""
    door = door_of(path)
    if door == "messages":
        return anthropic_error(error)
    return ollama_error(error) if door == "ollama" else error.envelope()


def anthropic_error(error: GatewayError) -> dict[str, Any]:
    """`{"type": "error", "error": {"type", "message"}}`, as Anthropic's API answers (and streams) a failure."""
    kind = _ANTHROPIC_TYPES.get(error.status_code, "api_error")
    return {"type": "error", "error": {"type": kind, "message": error.message}}


def ollama_error(error: GatewayError) -> dict[str, Any]:
    """`{"error": "<message>"}`, as Ollama answers (and streams) a failure."""
    return {"error": error.message}
