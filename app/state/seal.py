"""The state store holds only what this gateway wrote: names keyed and values sealed with its secret.

What the gateway acts on comes back from the store (a page's verdict, an "always", a round waiting for a yes, the
tool turns memory restores, a stored response), and a shared store (Redis on a network) can be written by whoever
reaches it. `SealedStore` stands in front of every store (SQLite, Redis, memory) with two keys derived by HKDF
from the gateway's secret (TOOLBRIDGE_TOKEN_KEY or its key file: token_key.py) under a label of their own:

- **Names are keyed**: an entry is stored under a keyed BLAKE2b of its name (a MAC, 128 bits, hex; a third of
  HMAC-SHA256's cost, and a restore keys two names per earlier turn), so reading the store never tells where a
  conversation's verdict or grant lives, nor confirms a conversation guessed word for word. Owners (slow digests
  of API keys, which a weak key would give away offline) are keyed the same way.
- **Values are sealed** with AES-256-GCM, the name as associated data. A value written by hand, copied from
  another name, altered, or sealed under another secret does not open: it is read as absent, with one warning that
  names the kinds of entry and never their content. AEAD rather than an HMAC beside the value: it authenticates
  the same name and value, hides tool results from whoever reads the store, and costs a tenth (a 1 MB entry:
  about 70 µs, against 680 µs for HMAC-SHA256).

Write access to the store can still delete entries, or take a claim's place first: the gateway then forgets
(asks again, says nothing waits), but never acts on what it did not write.
"""

import hashlib
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

import anyio.to_thread
import structlog

from app.state.store import ANONYMOUS, CLAIMED, StateStore

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

log = structlog.get_logger("toolbridge.state")

LABEL = b"toolbridge state store seal v1"  # the HKDF label: these keys serve nothing else
VERSION = b"\x01"  # the first byte of every sealed value
NONCE_BYTES = 12  # random per write: far from the 2**32 writes after which a repeat becomes thinkable
NAME_BYTES = 16  # of a keyed name or owner: 128 bits


class SealedStore:
    """A store whose names are keyed and whose values are sealed; what does not open is not there."""

    def __init__(self, inner: StateStore, secret: bytes) -> None:
        self.inner = inner
        self.kind = inner.kind
        self._secret = secret
        self._keys: _Keys | None = None  # derived at the first read or write (_derived)

    @property
    def _sealing(self) -> "_Keys":
        if self._keys is None:  # asked outside the methods below, which derive them off the event loop first
            self._keys = _derived(self._secret)
        return self._keys

    async def _ready(self) -> None:
        # In a worker thread: cryptography's import takes 10-25 ms, which would hold every request on the loop.
        if self._keys is None:
            self._keys = await anyio.to_thread.run_sync(_derived, self._secret)

    def stored_name(self, key: str) -> str:
        """Where `key` is kept in the store underneath."""
        return hashlib.blake2b(_bytes(key), key=self._sealing.names, digest_size=NAME_BYTES,
                               person=b"name").hexdigest()

    def stored_owner(self, owner: str) -> str:
        # ANONYMOUS stays itself: the stores give it no share of their own (there is one owner then).
        if owner == ANONYMOUS:
            return ANONYMOUS
        return hashlib.blake2b(_bytes(owner), key=self._sealing.names, digest_size=NAME_BYTES,
                               person=b"owner").hexdigest()

    def seal(self, key: str, value: bytes) -> bytes:
        nonce = os.urandom(NONCE_BYTES)
        return VERSION + nonce + self._sealing.aead.encrypt(nonce, value, VERSION + _bytes(key))

    def open(self, key: str, sealed: bytes) -> bytes | None:
        """The value written under `key`, or None when it was not sealed there by this secret."""
        if not sealed.startswith(VERSION) or len(sealed) < 1 + NONCE_BYTES + 16:
            return None
        keys = self._sealing
        try:
            return keys.aead.decrypt(sealed[1:1 + NONCE_BYTES], sealed[1 + NONCE_BYTES:], VERSION + _bytes(key))
        except keys.invalid:
            return None

    async def get_many(self, keys: Sequence[str], max_bytes: int | None = None) -> dict[str, bytes]:
        await self._ready()
        names = {self.stored_name(key): key for key in keys}  # in the keys' order: `max_bytes` takes them so
        found: dict[str, bytes] = {}
        refused: list[str] = []
        for name, sealed in (await self.inner.get_many(list(names), max_bytes)).items():
            key = names[name]
            if sealed == b"":  # there, but no room: not read, so nothing to open (a sealed value is never empty)
                found[key] = b""
            elif (value := self.open(key, sealed)) is not None:
                found[key] = value
            else:
                refused.append(key)
        if refused:
            log.warning("state_entry_refused", kinds=sorted({_kind(key) for key in refused}), entries=len(refused),
                        reason="not sealed by this gateway: written by hand, altered, or under another "
                        "TOOLBRIDGE_TOKEN_KEY", consequence="read as absent")
        return found

    async def put_many(self, items: Mapping[str, bytes], owner: str = ANONYMOUS) -> None:
        await self._ready()
        sealed = {self.stored_name(key): self.seal(key, value) for key, value in items.items()}
        await self.inner.put_many(sealed, self.stored_owner(owner))

    async def claim(self, key: str, owner: str = ANONYMOUS, mark: bytes = CLAIMED) -> bool:
        # Sealed like any value: a verdict's place is read after a message claimed it (ops/waiting_rounds.py).
        await self._ready()
        return await self.inner.claim(self.stored_name(key), self.stored_owner(owner), self.seal(key, mark))

    async def problem(self) -> str | None:
        return await self.inner.problem()

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Keys(NamedTuple):
    names: bytes  # BLAKE2b's key for names and owners
    aead: "AESGCM"  # the values' cipher
    invalid: type[Exception]  # what it raises for a value that does not open (cryptography's InvalidTag)


def _derived(secret: bytes) -> _Keys:
    """The seal's keys. cryptography is imported here, not at the top: it is 6 MB of memory that a gateway which
    has stored nothing yet (an idle one) need not hold (issue 47)."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    derived = HKDF(algorithm=hashes.SHA256(), length=64, salt=None, info=LABEL).derive(secret)
    return _Keys(derived[:32], AESGCM(derived[32:]), InvalidTag)


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _kind(key: str) -> str:
    """What kind of entry a name is for the log ("turn", "verdict", "always"...): its prefix, never a digest."""
    kind, colon, _ = key.partition(":")
    return kind if colon and kind.isalpha() and len(kind) <= 16 else "entry"
