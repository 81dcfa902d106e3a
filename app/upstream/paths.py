"""What of a client's pass-through URL may reach the upstream: a path that stays below the base URL, and
a query without credentials. Pure functions; the upstream key goes with every forwarded request, so a path
that could leave the base URL (an absolute URL, dot segments, encoded or not) is refused, never cleaned."""

import re
from urllib.parse import parse_qsl, unquote, urlencode

from app.errors import InvalidRequest

# Query parameters that carry a client's key; the upstream gets the gateway's own key instead.
_CREDENTIAL_PARAMS = frozenset({"api_key", "api-key", "access_token"})
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def relative_path(raw: str) -> str:
    """The raw (percent-encoded) path below the base URL, as the client sent it.

    Raises:
        InvalidRequest: a `.` or `..` segment (in any encoding, or hidden behind an encoded slash), or a
            control character.
    """
    raw = raw.lstrip("/")
    for segment in raw.split("/"):
        decoded = unquote(segment)
        if _CONTROL.search(decoded):
            raise InvalidRequest("The path contains a control character.", code="invalid_path")
        if any(part in (".", "..") for part in re.split(r"[/\\]", decoded)):
            raise InvalidRequest("The path may not contain '.' or '..' segments.", code="invalid_path")
    return raw


def without_credentials(query: str) -> str:
    """The query string without the parameters that carry a client's key."""
    if not query:
        return query
    pairs = parse_qsl(query, keep_blank_values=True)
    kept = [(k, v) for k, v in pairs if k.lower() not in _CREDENTIAL_PARAMS]
    return query if len(kept) == len(pairs) else urlencode(kept)
