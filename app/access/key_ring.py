"""The keys the gateway takes and what each may use: TOOLBRIDGE_API_KEYS (everything) and the keys file
(app/access/keys_file.py), kept current while the gateway runs. The file is re-read when it is written (the
lifespan watches it) and on SIGHUP; a file that fails then keeps the last good one in force, and the problem
is logged and shown on /health (`problem`), never a key.

A presented key is found by its SHA-256, so that a key written as its digest is found alike, and the lookup
compares digests, not the key: its time tells nothing of a key.
"""

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import NotRequired, TypedDict

import structlog

from app.access.keys_file import KeysFile, KeysFileError, key_digest, load_keys_file
from app.access.scope import EVERYTHING, KeyScope
from app.logging import add_secrets

log = structlog.get_logger("toolbridge.keys")


class KeysFileShown(TypedDict):
    """What /health says of the keys file (`error` while its last read failed)."""

    path: str
    keys: int
    error: NotRequired[str]


class KeyRing:
    def __init__(self, api_keys: Iterable[str], path: Path | None, toolsets: Mapping[str, Sequence[str]]) -> None:
        """Reads the keys file at once.

        Raises:
            KeysFileError: the keys file cannot be used (the gateway must not start without it).
        """
        self._everything = frozenset(key_digest(key) for key in api_keys)
        self.path, self._toolsets = path, toolsets
        self.problem: str | None = None  # why the last re-read failed
        self._file = self._load() if path is not None else KeysFile({}, {})

    @property
    def required(self) -> bool:
        """Whether a caller must show a key: some are set, in TOOLBRIDGE_API_KEYS or a keys file."""
        return bool(self._everything) or self.path is not None

    def scope_of(self, presented: str) -> KeyScope | None:
        """What the presented key may use; None: it is no key of ours."""
        digest = key_digest(presented)
        if digest in self._everything:
            return EVERYTHING
        return self._file.scopes.get(digest)

    def now(self, scope: KeyScope) -> KeyScope | None:
        """What the key admitted with `scope` may use now, as the keys file says it: None once it was taken out.
        A request asks again before each tool call, so a key taken out stops its requests in flight too; the keys
        of TOOLBRIDGE_API_KEYS (and a gateway without keys) keep theirs."""
        return self._file.scopes.get(scope.digest) if scope.digest else scope

    def reload(self) -> None:
        """Re-reads the keys file; when it fails, the last good one stays in force."""
        if self.path is None:
            return
        try:
            self._file = self._load()
        except KeysFileError as exc:
            self.problem = str(exc)
            log.error("keys_file_reload_failed", error=self.problem, effect="the last good keys file stays in force")
            return
        self.problem = None
        add_secrets(self._file.plain)  # a key first written now is kept out of the log as those at start are
        log.info("keys_file_reloaded", path=str(self.path), keys=len(self._file.scopes))

    def secrets(self) -> list[str]:
        """The keys the file holds as themselves, for the log to redact."""
        return list(self._file.plain)

    def describe(self) -> KeysFileShown:
        """What /health says of the keys file to a caller who sees everything."""
        shown: KeysFileShown = {"path": str(self.path), "keys": len(self._file.scopes)}
        if self.problem:
            shown["error"] = self.problem
        return shown

    def _load(self) -> KeysFile:
        assert self.path is not None
        loaded = load_keys_file(self.path, self._toolsets)
        if clash := [loaded.labels[digest] for digest in loaded.scopes if digest in self._everything]:
            raise KeysFileError(f"keys file {self.path}: {', '.join(clash)} also in TOOLBRIDGE_API_KEYS, which gives "
                                "a key everything; list each key in one place")
        return loaded
