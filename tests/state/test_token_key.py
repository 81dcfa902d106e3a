"""The vault's generated key file: created owner-only and atomically, the same key for every process that
starts at once, and refused (with a message naming the file and the fix) when others can read it."""

import os
import threading
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from app.state.token_key import TokenKeyError, key_from_file, key_from_setting


def test_a_key_is_generated_once_into_an_owner_only_file(tmp_path: Path) -> None:
    path = tmp_path / "data" / "state.tokens.key"
    umask = os.umask(0)  # whatever the umask allows, the file is the owner's alone
    try:
        key = key_from_file(path)
    finally:
        os.umask(umask)
    Fernet(key)
    assert path.stat().st_mode & 0o777 == 0o600
    assert key_from_file(path) == key and path.read_bytes().strip() == key
    assert os.listdir(path.parent) == ["state.tokens.key"]  # no temporary file left behind


def test_processes_starting_at_once_all_get_the_same_key(tmp_path: Path) -> None:
    path = tmp_path / "state.tokens.key"
    keys: list[bytes] = []
    start = threading.Barrier(8)

    def one() -> None:
        start.wait()
        keys.append(key_from_file(path))

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(keys) == 8 and len(set(keys)) == 1
    assert os.listdir(tmp_path) == ["state.tokens.key"]


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_key_file_others_can_read_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "state.tokens.key"
    key = key_from_file(path)
    path.chmod(mode)
    with pytest.raises(TokenKeyError) as raised:
        key_from_file(path)
    message = str(raised.value)
    assert f"{path} can be read by others (mode {mode:o})" in message and f"chmod 600 {path}" in message
    assert "TOOLBRIDGE_TOKEN_KEY" in message and key.decode() not in message
    path.chmod(0o600)
    assert key_from_file(path) == key


def test_a_key_file_holding_no_key_is_refused_without_its_content(tmp_path: Path) -> None:
    path = tmp_path / "state.tokens.key"
    path.write_text("something else entirely\n")
    path.chmod(0o600)
    with pytest.raises(TokenKeyError, match="holds no Fernet key: remove it") as raised:
        key_from_file(path)
    assert "something else" not in str(raised.value)


def test_a_symbolic_link_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.key"
    key_from_file(target)
    (tmp_path / "state.tokens.key").symlink_to(target)
    with pytest.raises(TokenKeyError, match=r"state\.tokens\.key cannot be used"):
        key_from_file(tmp_path / "state.tokens.key")


def test_the_setting_is_checked_and_never_echoed() -> None:
    key = Fernet.generate_key()
    assert key_from_setting(f" {key.decode()}\n") == key
    with pytest.raises(TokenKeyError, match="TOOLBRIDGE_TOKEN_KEY is not a Fernet key") as raised:
        key_from_setting("hunter2")
    assert "hunter2" not in str(raised.value)
