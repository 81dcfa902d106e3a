"""The API key a request carries, as every front door's clients send it."""

from collections.abc import Mapping

ANTHROPIC_KEY_HEADER = "x-api-key"  # what Anthropic's SDKs and Claude Code send; every other client sends a bearer


def presented_key(headers: Mapping[str, str]) -> str:
    """`Authorization: Bearer <key>`, else `x-api-key: <key>`; "" when the request carries neither. Another
    Authorization scheme is no key here (the status page's Basic credentials are read by the guard)."""
    scheme, _, presented = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer":
        return presented.strip()
    return "" if scheme else headers.get(ANTHROPIC_KEY_HEADER, "").strip()
