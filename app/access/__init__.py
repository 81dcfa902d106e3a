"""Who may use what: the client keys (TOOLBRIDGE_API_KEYS and the keys file) and what each key may use. A leaf:
no SDK, no HTTP client, no web framework."""

from app.access.key_ring import KeyRing
from app.access.keys_file import CALLER_CHARS, KeysFileError, key_digest
from app.access.presented import presented_key
from app.access.scope import CURRENT_SCOPE, EVERYTHING, NOBODY, KeyScope

__all__ = [
    "CALLER_CHARS", "CURRENT_SCOPE", "EVERYTHING", "NOBODY", "KeyRing", "KeyScope", "KeysFileError", "key_digest",
    "presented_key",
]
