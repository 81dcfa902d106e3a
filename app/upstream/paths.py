"""What of a client's pass-through URL may reach the upstream: a path that stays below the base URL, and
a query without credentials. Pure functions; the upstream key goes with every forwarded request, so a path
that could leave the base URL (an absolute URL, dot segments, encoded or not) is refused, never cleaned."""

import re
import unicodedata
from urllib.parse import parse_qsl, unquote, urlencode

from app.openai.errors import InvalidRequest

# Query parameters that carry a client's key; the upstream gets the gateway's own key instead.
_CREDENTIAL_PARAMS = frozenset({"api_key", "api-key", "access_token"})
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Separators some server or framework on the way may read inside a segment: slashes, backslashes, and
# the `;` of path parameters (`..;/` is `../` to Tomcat and Spring).
_INNER_SEPARATORS = re.compile(r"[/\\;]")
DECODE_ROUNDS = 3  # %252e%252e is `..` to a server that decodes twice


def relative_path(raw: str) -> str:
    """The raw (percent-encoded) path below the base URL, as the client sent it.

    Raises:
        InvalidRequest: a `.` or `..` segment (in any encoding, or hidden behind an encoded slash), or a
            control character.
    """
    raw = raw.lstrip("/")
    for segment in raw.split("/"):
        for decoded in _readings(segment):
            if _CONTROL.search(decoded):
                raise InvalidRequest("The path contains a control character.", code="invalid_path")
            if any(part in (".", "..") for part in _INNER_SEPARATORS.split(decoded)):
                raise InvalidRequest("The path may not contain '.' or '..' segments.", code="invalid_path")
    return raw


def _readings(segment: str) -> list[str]:
    """The ways a server may read a segment: decoded once or again, and with compatibility characters (the
    full-width `．`) folded to plain ones."""
    readings = [segment]
    for _ in range(DECODE_ROUNDS):
        decoded = unquote(readings[-1])
        if decoded == readings[-1]:
            break
        readings.append(decoded)
    return readings + [unicodedata.normalize("NFKC", reading) for reading in readings]


def without_credentials(query: str) -> str:
    """The query string without the parameters that carry a client's key."""
    if not query:
        return query
    pairs = parse_qsl(query, keep_blank_values=True)
    kept = [(k, v) for k, v in pairs if k.lower() not in _CREDENTIAL_PARAMS]
    return query if len(kept) == len(pairs) else urlencode(kept)
