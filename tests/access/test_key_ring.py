"""The keys the gateway takes, kept current: lookups by the key or its digest, re-reads, the last good file."""

import json
from pathlib import Path

import pytest
import structlog

from app.access import EVERYTHING, KeyRing, KeysFileError, key_digest


def write(path: Path, keys: dict[str, object]) -> Path:
    path.write_text(json.dumps({"keys": keys}))
    return path


def test_keys_of_both_places_and_their_sets(tmp_path: Path) -> None:
    path = write(tmp_path / "keys.json", {"sk-a": {"servers": ["files"]},
                                          f"sha256:{key_digest('sk-b')}": {"toolsets": ["clock"]}})
    ring = KeyRing({"sk-ops"}, path, {"clock": ["time"]})
    assert ring.required and ring.scope_of("sk-ops") is EVERYTHING
    assert ring.scope_of("sk-a").names == {"files"}  # type: ignore[union-attr]
    assert ring.scope_of("sk-b").names == {"time"}  # type: ignore[union-attr]
    assert ring.scope_of("sk-c") is None and ring.scope_of(key_digest("sk-b")) is None  # the digest is no key
    assert ring.secrets() == ["sk-a"]


def test_no_keys_anywhere_needs_none_and_an_empty_file_still_needs_one(tmp_path: Path) -> None:
    assert not KeyRing(set(), None, {}).required
    assert KeyRing(set(), write(tmp_path / "keys.json", {}), {}).required


def test_a_bad_file_at_start_raises(tmp_path: Path) -> None:
    with pytest.raises(KeysFileError, match="no such file"):
        KeyRing(set(), tmp_path / "missing.json", {})


def test_a_reload_that_fails_keeps_the_last_good_file_and_says_why(tmp_path: Path) -> None:
    path = write(tmp_path / "keys.json", {"sk-a": {"servers": ["files"]}})
    ring = KeyRing({"sk-ops"}, path, {})
    write(path, {"sk-a": {"servers": ["files", "time"]}})
    ring.reload()
    assert ring.scope_of("sk-a").names == {"files", "time"} and ring.problem is None  # type: ignore[union-attr]
    path.write_text("{")
    with structlog.testing.capture_logs() as logs:
        ring.reload()
    assert ring.scope_of("sk-a").names == {"files", "time"}  # type: ignore[union-attr]
    assert ring.problem is not None and "not JSON" in ring.problem and ring.describe()["error"] == ring.problem
    assert [entry["event"] for entry in logs] == ["keys_file_reload_failed"] and "sk-a" not in str(logs)
    write(path, {"sk-ops": {}})  # in both places: refused, the last good file stays
    ring.reload()
    assert ring.problem is not None and "key #1 also in TOOLBRIDGE_API_KEYS" in ring.problem
    write(path, {})
    ring.reload()
    assert ring.problem is None and ring.scope_of("sk-a") is None and ring.describe() == {"path": str(path), "keys": 0}


def test_now_is_a_keys_scope_as_the_file_says_it_at_this_moment(tmp_path: Path) -> None:
    path = write(tmp_path / "keys.json", {"sk-a": {"servers": ["files", "time"]}, "sk-b": {"servers": ["files"]}})
    ring = KeyRing({"sk-ops"}, path, {})
    admitted = ring.scope_of("sk-a")
    assert admitted is not None and ring.now(admitted) == admitted
    write(path, {"sk-a": {"servers": ["files"]}, "sk-b": {"servers": ["files"]}})
    ring.reload()
    narrowed = ring.now(admitted)
    assert narrowed is not None and narrowed.names == {"files"} and narrowed.caller == admitted.caller
    write(path, {"sk-b": {"servers": ["files"]}})
    ring.reload()
    assert ring.now(admitted) is None  # taken out
    assert ring.now(EVERYTHING) is EVERYTHING  # the keys of TOOLBRIDGE_API_KEYS, and no keys, stay as they are
    assert "digest" not in repr(admitted) and key_digest("sk-a") not in repr(admitted)
