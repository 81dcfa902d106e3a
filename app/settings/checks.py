"""The checks some settings' values pass, as annotated types the settings' fields are declared with: a web
address, a state URL, toolsets, a log level in any case, a path given as text, client keys, a Fernet key. A failed
check is a clear message naming the setting (pydantic adds the name)."""

import base64
import binascii
import re
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, SecretStr

from app.settings.vocabularies import parse_state_url


class Group(BaseModel):
    """A group of settings (and the whole): a name it does not have is an error, never silently dropped (a setting
    given by its flat name, `Settings(upstream_url=...)`, would otherwise be ignored and the default used)."""

    model_config = ConfigDict(extra="forbid")


_TOOLSET_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def _web_address(value: str) -> str:
    parts = urlsplit(value)
    if value and (parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment):
        raise ValueError("must be an http(s) address such as http://127.0.0.1:8000, or empty")
    return value.rstrip("/")


def _known_store(value: str) -> str:
    parse_state_url(value)
    return value


def _usable_toolsets(value: dict[str, list[str]]) -> dict[str, list[str]]:
    for name, members in value.items():
        if not _TOOLSET_NAME.fullmatch(name):
            raise ValueError(f"toolset name '{name}' must be 1-64 letters, digits, '_', '-' or '.'")
        if not members:
            raise ValueError(f"toolset '{name}' lists no server or tool")
    return value


def _fernet_key(value: SecretStr) -> SecretStr:
    # Checked with the settings, not only when the vault opens, so a mistyped key stops the gateway at start.
    text = value.get_secret_value().strip()
    if not text:
        return value  # blank: unset (a generated key, see app/state/vault_open.py)
    try:
        whole = len(base64.urlsafe_b64decode(text.encode("ascii"))) == 32
    except (ValueError, binascii.Error):
        whole = False
    if not whole:
        raise ValueError("is not a Fernet key (32 bytes in url-safe base64); make one with: python -c "
                         "'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'")
    return value


def _keys_or_nothing(value: SecretStr) -> SecretStr:
    text = value.get_secret_value()
    if text.strip() and not items(text):  # " , " would otherwise turn authentication off unnoticed
        raise ValueError("lists no key: give one or more keys, comma-separated, or leave it empty")
    return value


def items(text: str) -> list[str]:
    """A comma-separated setting's items, blanks left out."""
    return [item.strip() for item in text.split(",") if item.strip()]


def _lowercase(value: object) -> object:
    return value.lower() if isinstance(value, str) else value


def _path_as_text(value: object) -> object:
    return str(value) if isinstance(value, Path) else value


WebAddress = Annotated[str, AfterValidator(_web_address)]  # http(s)://host[:port][/path], no trailing slash
StateUrl = Annotated[str, AfterValidator(_known_store)]
Toolsets = Annotated[dict[str, list[str]], AfterValidator(_usable_toolsets)]
LogLevel = Annotated[Literal["debug", "info", "warning", "error"], BeforeValidator(_lowercase)]
PathsText = Annotated[str, BeforeValidator(_path_as_text)]  # a Path given in code reads as its text
ClientKeys = Annotated[SecretStr, AfterValidator(_keys_or_nothing)]  # TOOLBRIDGE_API_KEYS: empty, or some key
FernetKey = Annotated[SecretStr, AfterValidator(_fernet_key)]  # the token vault's key, kept secret
