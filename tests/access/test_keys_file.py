"""The keys file read and checked: its forms, and every problem named without a key."""

import hashlib
from pathlib import Path
from typing import Any

import pytest

from app.access.keys_file import KeysFileError, key_digest, load_keys_file, parse_keys

TOOLSETS = {"research": ["web", "papers__search"], "clock": ["time"]}
SECRET = "sk-very-secret-1"


def test_keys_their_digests_servers_and_toolsets() -> None:
    digest = hashlib.sha256(b"sk-ops").hexdigest()
    parsed = parse_keys({"keys": {SECRET: {"servers": ["files"], "toolsets": ["research"], "name": "alice"},
                                  f"sha256:{digest.upper()}": {"servers": "*"},
                                  "sk-chat-only": {}}}, TOOLSETS)
    alice, ops, chat = (parsed.scopes[key_digest(SECRET)], parsed.scopes[digest],
                        parsed.scopes[key_digest("sk-chat-only")])
    assert alice.names == {"files", "web", "papers__search"} and alice.caller == key_digest(SECRET)[:16]
    assert ops.everything and chat.names == frozenset()
    assert parsed.labels[key_digest(SECRET)] == 'key #1 ("alice")'
    assert parsed.plain == (SECRET, "sk-chat-only")  # for the log to redact; a digest is no key


def test_sign_in_names_the_servers_whose_shared_sign_in_a_key_may_change() -> None:
    parsed = parse_keys({"keys": {"sk-a": {"servers": ["files", "github"], "sign_in": ["github"]},
                                  "sk-b": {"servers": "*", "sign_in": "*"}, "sk-c": {"servers": "*"}}}, TOOLSETS)
    named, every, none = (parsed.scopes[key_digest(key)] for key in ("sk-a", "sk-b", "sk-c"))
    assert named.sign_ins == {"github"} and every.sign_ins is None and none.sign_ins == frozenset()
    assert (named.may_sign_in("github"), named.may_sign_in("files")) == (True, False)
    assert every.may_sign_in("github") and not none.may_sign_in("github")  # "servers": "*" alone is not enough


@pytest.mark.parametrize(("data", "problem"), [
    ([], "must be a JSON object"),
    ({"keys": []}, "must be a JSON object"),
    ({"keys": {}, "extra": 1}, "top level: an unknown field, not repeated in case it is a key (known: keys)"),
    ({"key": {}}, 'top level: unknown field "key" (did you mean "keys"?)'),
    ({SECRET: {"servers": "*"}}, "top level: an unknown field, not repeated in case it is a key (known: keys)"),
    ({"keys": {SECRET: ["files"]}}, 'key #1: must be an object such as {"servers": ["time"]}'),
    ({"keys": {SECRET: {"server": ["files"]}}}, 'key #1: unknown field "server" (did you mean "servers"?)'),
    ({"keys": {SECRET: {"Toolsets": [], "name": "bob"}}}, 'key #1 ("bob"): unknown field "Toolsets" (did you mean '
                                                          '"toolsets"?)'),
    ({"keys": {SECRET: {"sk-other-key": {}, "x": 1}}}, "key #1: an unknown field, not repeated in case it is a key "
                                                       "(known: servers, toolsets, sign_in, name); 1 more unknown"),
    ({"keys": {SECRET: {"servers": "files"}}}, 'key #1: servers must be a list of server names, or "*"'),
    ({"keys": {SECRET: {"servers": ["files", ""]}}}, "key #1: servers must be a list"),
    ({"keys": {SECRET: {"toolsets": "research"}}}, "key #1: toolsets must be a list of toolset names"),
    ({"keys": {SECRET: {"toolsets": ["nope"]}}}, "key #1: toolset 'nope' is not one of TOOLBRIDGE_TOOLSETS (clock, "
                                                 "research)"),
    ({"keys": {SECRET: {"name": 3}}}, "key #1: name must be a string"),
    ({"keys": {SECRET: {"sign_in": "github"}}}, 'key #1: sign_in must be a list of server names, or "*"'),
    ({"keys": {SECRET: {"sign_in": [""]}}}, "key #1: sign_in must be a list"),
    ({"keys": {"sk ok": {}}}, "key #1: a key must be printable ASCII without spaces or commas"),
    ({"keys": {"sk,two": {}}}, "key #1: a key must be printable ASCII"),
    ({"keys": {"": {}}}, "key #1: a key must be printable ASCII"),
    ({"keys": {"sha256:abc": {}}}, "key #1: after 'sha256:' must come the key's SHA-256, 64 hex digits"),
    ({"keys": {SECRET: {"name": "a"}, f"sha256:{key_digest(SECRET)}": {"name": "b"}}},
     'key #2 ("b") is key #1 ("a") again'),
])
def test_each_problem_is_named_without_the_key(data: Any, problem: str) -> None:
    with pytest.raises(KeysFileError) as raised:
        parse_keys(data, TOOLSETS)
    assert problem in str(raised.value) and SECRET not in str(raised.value) and "sk ok" not in str(raised.value)


@pytest.mark.parametrize(("content", "problem"), [
    (None, "no such file (TOOLBRIDGE_KEYS_FILE)"),
    (b"{\"keys\": {\"" + SECRET.encode() + b"\": ", "not JSON: Expecting value: line 1"),
    (b"\xff\xfe", "cannot be read (UnicodeDecodeError)"),
    (b'{"keys": {"' + SECRET.encode() + b'": {"servers": ["a"]}, "' + SECRET.encode() + b'": {"servers": "*"}}}',
     "an object names the same key or field twice"),
])
def test_a_file_that_cannot_be_read_names_itself(tmp_path: Path, content: bytes | None, problem: str) -> None:
    path = tmp_path / "keys.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(KeysFileError) as raised:
        load_keys_file(path, TOOLSETS)
    assert str(raised.value).startswith(f"keys file {path}: ") and problem in str(raised.value)
    assert SECRET not in str(raised.value)
