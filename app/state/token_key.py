"""The key that encrypts the token vault at rest: TOOLBRIDGE_TOKEN_KEY, or one generated on first use and kept
in an owner-only file beside the vault's database.

The file is created atomically (written under a temporary name, then linked into place, so a second gateway
starting at the same moment reads the first one's key rather than a half-written or a different one), and a
file that others can read is refused rather than used: anyone who can read it can read every token.
"""

import os
import secrets
import stat
from pathlib import Path

from cryptography.fernet import Fernet

SETTING = "TOOLBRIDGE_TOKEN_KEY"


class TokenKeyError(Exception):
    """The vault's key cannot be had safely; the message names the setting or the file and what to do."""


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
