"""The keys file (TOOLBRIDGE_KEYS_FILE): the client keys the operator gives each a set of MCP servers, read and
checked. JSON in the spirit of mcp.json:

    {"keys": {"sk-alice": {"servers": ["files", "time"]}, "sk-bob": {"toolsets": ["research"], "name": "bob"},
              "sha256:<64 hex digits>": {"servers": "*"}}}

A key is written as itself, or as `sha256:` and its SHA-256 in hex, so that the file need not hold it. A key's
set names servers (`"*"`: every one) and toolsets of TOOLBRIDGE_TOOLSETS, whose members are added. `sign_in`
names the servers (`"*"`: every one it may use) whose one shared sign-in the key may start and end (without it,
only TOOLBRIDGE_API_KEYS keys may: app/access/scope.py). `name` is for people: the errors and the log say
`key #2 ("bob")`, never a key.
"""

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.access.scope import KeyScope
from app.openai.wire import JSONObject, JSONValue
from app.settings.fields import unknown_field

SHA256_PREFIX = "sha256:"
_FIELDS = ("servers", "toolsets", "sign_in", "name")  # a key's, in the order the messages list them
_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")
_KEY = re.compile(r"[\x21-\x7e]+")  # what a bearer header and a Basic password both carry: no spaces, ASCII
CALLER_CHARS = 16  # of the key's digest, to tell callers apart in the recent calls and requests
SHAPE = ('{"keys": {KEY: {"servers": [NAME, ...] or "*", "toolsets": [NAME, ...], "sign_in": [NAME, ...] or "*", '
         '"name": LABEL}}}')


class KeysFileError(Exception):
    """The keys file cannot be used. The message names the file and the problem, never a key."""


@dataclass(frozen=True)
class KeysFile:
    scopes: Mapping[str, KeyScope]  # by the key's SHA-256 in hex
    labels: Mapping[str, str]  # by the same: how messages name the key
    plain: tuple[str, ...] = ()  # keys written as themselves, for the log to redact


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def load_keys_file(path: Path, toolsets: Mapping[str, Sequence[str]]) -> KeysFile:
    """The keys file at `path`, checked.

    Raises:
        KeysFileError: it is missing, unreadable, not JSON, or not of the shape above.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise KeysFileError(f"keys file {path}: no such file (TOOLBRIDGE_KEYS_FILE)") from exc
    except (OSError, UnicodeError) as exc:
        raise KeysFileError(f"keys file {path}: cannot be read ({type(exc).__name__})") from exc
    try:
        data = json.loads(text, object_pairs_hook=_once_each)
    except ValueError as exc:  # the decoder's message says where, without quoting the text
        raise KeysFileError(f"keys file {path}: not JSON: {exc}") from exc
    except KeysFileError as exc:
        raise KeysFileError(f"keys file {path}: {exc}") from exc
    try:
        return parse_keys(data, toolsets)
    except KeysFileError as exc:
        raise KeysFileError(f"keys file {path}: {exc}") from exc


def _once_each(pairs: list[tuple[str, JSONValue]]) -> JSONObject:
    """An object whose names are all different: JSON's last-one-wins would drop a key's first set unseen."""
    if len({name for name, _ in pairs}) != len(pairs):
        raise KeysFileError("an object names the same key or field twice")
    return dict(pairs)


def parse_keys(data: JSONValue, toolsets: Mapping[str, Sequence[str]]) -> KeysFile:
    if isinstance(data, dict):
        _known_fields(data, ("keys",), "top level")
    keys = data.get("keys") if isinstance(data, dict) else None
    if not isinstance(keys, dict):
        raise KeysFileError(f"must be a JSON object {SHAPE}")
    scopes: dict[str, KeyScope] = {}
    labels: dict[str, str] = {}
    plain: list[str] = []
    for number, (key, entry) in enumerate(keys.items(), 1):
        label = f"key #{number}" + (f' ("{entry["name"]}")' if isinstance(entry, dict) and
                                    isinstance(entry.get("name"), str) else "")
        digest = _digest_of(key, label)
        if digest in scopes:
            raise KeysFileError(f"{label} is {labels[digest]} again (once as its sha256, perhaps)")
        scopes[digest] = KeyScope(_names(entry, label, toolsets), caller=digest[:CALLER_CHARS], digest=digest,
                                  sign_ins=_sign_ins(entry, label))
        labels[digest] = label
        if not key.startswith(SHA256_PREFIX):
            plain.append(key)
    return KeysFile(scopes, labels, tuple(plain))


def _digest_of(key: str, label: str) -> str:
    if key.startswith(SHA256_PREFIX):
        digest = key.removeprefix(SHA256_PREFIX).lower()
        if not _HEX_DIGEST.fullmatch(digest):
            raise KeysFileError(f"{label}: after 'sha256:' must come the key's SHA-256, 64 hex digits")
        return digest
    if not _KEY.fullmatch(key) or "," in key:
        raise KeysFileError(f"{label}: a key must be printable ASCII without spaces or commas")
    return key_digest(key)


def _names(entry: JSONValue, label: str, toolsets: Mapping[str, Sequence[str]]) -> frozenset[str] | None:
    """The names the key may use (servers, and the toolsets' members); None: every server."""
    if not isinstance(entry, dict):
        raise KeysFileError(f'{label}: must be an object such as {{"servers": ["time"]}}')
    _known_fields(entry, _FIELDS, label)
    if "name" in entry and not isinstance(entry["name"], str):
        raise KeysFileError(f"{label}: name must be a string")
    servers = entry.get("servers", [])
    if servers == "*":
        return None
    names = set(_strings(servers, f'{label}: servers must be a list of server names, or "*"'))
    for toolset in _strings(entry.get("toolsets", []), f"{label}: toolsets must be a list of toolset names"):
        if toolset not in toolsets:
            known = ", ".join(sorted(toolsets)) or "none are set"
            raise KeysFileError(f"{label}: toolset '{toolset}' is not one of TOOLBRIDGE_TOOLSETS ({known})")
        names.update(toolsets[toolset])
    return frozenset(names)


def _known_fields(fields: JSONObject, known: Sequence[str], where: str) -> None:
    """A field the file may not hold stops it, as mcp.json's do; its name is said only when it is near a known one,
    since a key written in the wrong place would be an unknown field too."""
    if unknown := [field for field in fields if field not in known]:
        more = f"; {len(unknown) - 1} more unknown" if len(unknown) > 1 else ""
        raise KeysFileError(f"{where}: {unknown_field(unknown[0], known, named=False)}{more}")


def _sign_ins(entry: JSONValue, label: str) -> frozenset[str] | None:
    """The servers whose shared sign-in the key may start and end (None: every one it may use); none unless named."""
    sign_in = entry.get("sign_in", []) if isinstance(entry, dict) else []  # an object: `_names` checked it
    if sign_in == "*":
        return None
    return frozenset(_strings(sign_in, f'{label}: sign_in must be a list of server names, or "*"'))


def _strings(value: JSONValue, problem: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise KeysFileError(problem)
    return [item for item in value if isinstance(item, str)]  # every one, as checked
