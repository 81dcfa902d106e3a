"""The gateway's secret: TOOLBRIDGE_TOKEN_KEY, or one generated on first use and kept in an owner-only file beside
the vault's database. It encrypts the token vault at rest, and the state store's seal is derived from it (seal.py).

Which one a state URL gets (`gateway_key`):
- SQLite: the setting, else the file beside the database (state.db -> state.tokens.key), made at the first start:
  it lives as long as what it opens (a container's volume); an operator who wants the two apart sets the setting.
- Redis: replicas share what is kept there, so they must share the key: the setting is required, since a key
  generated on one machine would be another replica's garbage.
- memory:// and none: made for this process alone, as what it opens is.

The file is created atomically (written under a temporary name, then linked into place, so a second gateway
starting at the same moment reads the first one's key rather than a half-written or a different one), and a
file that others can read is refused rather than used: anyone who can read it can read every token.
"""

import base64
import os
import secrets
import stat
from pathlib import Path

from cryptography.fernet import Fernet

from app.state.store import parse_state_url

SETTING = "TOOLBRIDGE_TOKEN_KEY"


class TokenKeyError(Exception):
    """The vault's key cannot be had safely; the message names the setting or the file and what to do."""


def gateway_key(state_url: str, token_key: str | None) -> bytes:
    """The Fernet key for this state URL (above).

    Raises:
        TokenKeyError: the setting is missing with Redis, is no Fernet key, or the key file cannot be used.
    """
    if token_key and token_key.strip():
        return key_from_setting(token_key)
    require_key(state_url, token_key)
    kind, path = parse_state_url(state_url)
    if kind == "sqlite":
        assert path is not None
        return key_from_file(key_path(path))
    return Fernet.generate_key()


def require_key(state_url: str, token_key: str | None) -> None:
    """Raises TokenKeyError, naming the setting, when the state URL is Redis and no key is set."""
    if parse_state_url(state_url)[0] == "redis" and not (token_key and token_key.strip()):
        raise TokenKeyError(f"{SETTING} must be set when TOOLBRIDGE_STATE_URL is redis://: replicas share the "
                            "sign-in tokens and the memory kept there, so they must share the key that encrypts "
                            "and seals them (the same on every replica)")


def secret_bytes(key: bytes) -> bytes:
    """A Fernet key's 32 bytes, what the seal's keys are derived from."""
    return base64.urlsafe_b64decode(key)


def key_path(state_path: Path) -> Path:
    return state_path.with_name(f"{state_path.stem}.tokens.key")


def key_from_setting(text: str) -> bytes:
    key = text.strip().encode()
    try:
        Fernet(key)
    except ValueError:
        raise TokenKeyError(f"{SETTING} is not a Fernet key (32 bytes in url-safe base64); make one with: python "
                            "-c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'"
                            ) from None
    return key


def key_from_file(path: Path) -> bytes:
    """The key kept in `path`, created owner-only (0600) when there is none yet."""
    try:
        try:
            return _read(path)
        except FileNotFoundError:
            _create(path)
        return _read(path)  # ours, or what another process starting at the same moment linked in first
    except OSError as exc:  # a symbolic link (refused: O_NOFOLLOW), a directory, no permission
        raise TokenKeyError(f"the token key file {path} cannot be used: {exc.strerror or exc}; "
                            f"or set {SETTING}") from exc


def _read(path: Path) -> bytes:
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        info = os.fstat(descriptor)
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise TokenKeyError(f"the token key file {path} can be read by others (mode "
                                f"{stat.S_IMODE(info.st_mode):o}): run `chmod 600 {path}`, or set {SETTING}")
        if hasattr(os, "getuid") and info.st_uid != os.getuid():
            raise TokenKeyError(f"the token key file {path} belongs to another user: the gateway's user must own "
                                f"it (chown), or set {SETTING}")
        text = os.read(descriptor, 1024).decode("ascii", "replace")
    finally:
        os.close(descriptor)
    try:
        return key_from_setting(text)
    except TokenKeyError:
        raise TokenKeyError(f"the token key file {path} holds no Fernet key: remove it to have a new one made "
                            "(signed-in servers then ask to sign in again)") from None


def _create(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(descriptor, Fernet.generate_key() + b"\n")
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    try:
        os.link(temporary, path)  # never replaces a key already there: another process's, written first
    except FileExistsError:
        pass
    finally:
        temporary.unlink()
