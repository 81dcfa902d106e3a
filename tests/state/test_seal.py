"""The seal in front of every store (app/state/seal.py): what the gateway wrote reads back; a value it did not
seal under that name with its secret (written by hand, copied, altered, another secret's, a previous version's)
is absent and logged by kind only; names and owners are keyed; values rest encrypted; and how the secret is had."""

import secrets
import sqlite3
import threading
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from structlog.testing import capture_logs

from app.state import seal
from app.state.open import open_state_store
from app.state.redis import PREFIX, RedisStore
from app.state.seal import SealedStore
from app.state.sqlite import SqliteStore
from app.state.store import ANONYMOUS, CLAIMED, Bounds, MemoryStore
from app.state.token_key import TokenKeyError, gateway_key, secret_bytes
from tests.support.replica_services import RedisServer

pytestmark = pytest.mark.anyio
ROOMY = Bounds(max_bytes=10**6, max_age_seconds=3600)
SECRET = secret_bytes(Fernet.generate_key())


def sealed() -> SealedStore:
    return SealedStore(MemoryStore(ROOMY), SECRET)


async def test_what_the_gateway_wrote_reads_back_in_order_and_nothing_else() -> None:
    store = sealed()
    await store.put_many({"turn:a": b"one", "answer:a": b"1"}, owner="alice-digest")
    await store.put_many({"turn:a": b"other"})  # written once: the first value stays, as underneath
    assert await store.get_many(["turn:a", "answer:a", "turn:b"]) == {"turn:a": b"one", "answer:a": b"1"}
    assert await store.get_many([]) == {}


async def test_names_and_owners_are_keyed_with_the_secret() -> None:
    store = sealed()
    await store.put_many({"verdict:abc": b"approve"}, owner="alice-digest")
    inner = store.inner
    assert isinstance(inner, MemoryStore)
    (name, (value, _, owner)), = inner._entries.items()
    assert "verdict" not in name and "abc" not in name and len(name) == 32
    assert owner != "alice-digest" and len(owner) == 32
    assert b"approve" not in value
    other = SealedStore(MemoryStore(ROOMY), secret_bytes(Fernet.generate_key()))
    assert other.stored_name("verdict:abc") != name and other.stored_owner("alice-digest") != owner
    assert store.stored_owner(ANONYMOUS) == ANONYMOUS  # no keys: one owner, bound by the whole store as before


@pytest.mark.parametrize("forged", ["by hand", "copied from another name", "altered", "another secret's"])
async def test_a_value_the_gateway_did_not_seal_there_is_absent_and_logged_by_kind_only(forged: str) -> None:
    store = sealed()
    canary = b"approve-" + secrets.token_hex(8).encode()
    value = {
        "by hand": canary,
        "copied from another name": store.seal("verdict:other-round", canary),
        "altered": (lambda s: s[:-1] + bytes([s[-1] ^ 1]))(store.seal("verdict:round", canary)),
        "another secret's": SealedStore(MemoryStore(ROOMY), secret_bytes(Fernet.generate_key())).seal(
            "verdict:round", canary),
    }[forged]
    await store.inner.put_many({store.stored_name("verdict:round"): value})
    with capture_logs() as logs:
        assert await store.get_many(["verdict:round", "turn:x"]) == {}
    assert [(entry["event"], entry["kinds"], entry["entries"]) for entry in logs] == [
        ("state_entry_refused", ["verdict"], 1)]
    assert canary.decode() not in repr(logs)


async def test_a_claim_is_won_once_and_its_mark_reads_back() -> None:
    store = sealed()
    assert await store.claim("resumed:t", owner="alice-digest") is True
    assert await store.claim("resumed:t", owner="alice-digest") is False
    assert await store.get_many(["resumed:t"]) == {"resumed:t": CLAIMED}  # a verdict's place is read after a claim


async def test_the_keys_are_derived_at_the_first_read_or_write_in_a_worker_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Deriving them starts cryptography's OpenSSL, 1.4 MB that a gateway which has stored nothing (an idle one) need
    not hold (issue 47); and not on the event loop, where the first use of the library would hold every request."""
    derived_in: list[threading.Thread] = []
    derive = seal._derived

    def recorded(secret: bytes) -> seal._Keys:
        derived_in.append(threading.current_thread())
        return derive(secret)

    monkeypatch.setattr(seal, "_derived", recorded)
    store = sealed()
    assert derived_in == []
    await store.put_many({"turn:a": b"one"})
    assert await store.get_many(["turn:a"]) == {"turn:a": b"one"} and await store.claim("resumed:t")
    assert len(derived_in) == 1 and derived_in[0] is not threading.current_thread()


async def test_a_bounded_read_still_marks_what_has_no_room() -> None:
    store = sealed()
    await store.put_many({"turn:new": bytes(600), "turn:old": bytes(600), "answer:x": b"1"})
    assert await store.get_many(["turn:new", "turn:old", "answer:x"], max_bytes=1000) == {
        "turn:new": bytes(600), "turn:old": b"", "answer:x": b"1"}


async def test_in_sqlite_nothing_rests_in_clear_and_a_restart_reads_it_back(tmp_path: Path) -> None:
    canary = b"tool result " + secrets.token_hex(16).encode()
    path = tmp_path / "state.db"
    for _ in range(2):
        async with SqliteStore(path, ROOMY) as inner:
            store = SealedStore(inner, SECRET)
            await store.put_many({"turn:a": canary}, owner="alice-digest")
            assert await store.get_many(["turn:a"]) == {"turn:a": canary}
    rest = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert canary not in rest and b"turn:a" not in rest and b"alice-digest" not in rest


async def test_in_redis_nothing_rests_in_clear_and_another_replica_with_the_secret_reads_it(
    redis_server: RedisServer,
) -> None:
    canary = b"tool result " + secrets.token_hex(16).encode()
    one, two = (SealedStore(RedisStore(redis_server.url, ROOMY), SECRET) for _ in range(2))
    await one.put_many({"turn:a": canary}, owner="alice-digest")
    assert await two.get_many(["turn:a"]) == {"turn:a": canary}
    client = redis_server.client()
    dumped = b"".join(client.dump(key) or b"" for key in client.scan_iter(PREFIX + "*"))
    assert canary not in dumped and b"turn:a" not in dumped and b"alice-digest" not in dumped
    for store in (one, two):
        await store.aclose()


async def test_a_previous_versions_sqlite_entries_are_dropped_at_the_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    async with SqliteStore(path, ROOMY) as inner:
        await inner.put_many({"turn:a": b"unsealed"})
    with sqlite3.connect(path) as older:
        older.execute("PRAGMA user_version=2")
    async with SqliteStore(path, ROOMY) as inner:
        assert inner._db().execute("SELECT count(*) FROM entries").fetchone() == (0,)


async def test_the_store_is_opened_sealed_with_the_key_file_beside_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    async with open_state_store(url, ROOMY) as store:
        assert isinstance(store, SealedStore)
        await store.put_many({"turn:a": b"kept"})
    assert (tmp_path / "state.tokens.key").stat().st_mode & 0o777 == 0o600
    async with open_state_store(url, ROOMY) as store:  # a restart: the same key file, the same seal
        assert store is not None and await store.get_many(["turn:a"]) == {"turn:a": b"kept"}
    async with open_state_store(url, ROOMY, token_key=Fernet.generate_key().decode()) as store:
        assert store is not None and await store.get_many(["turn:a"]) == {}  # another secret reads nothing


async def test_a_key_file_that_cannot_be_used_turns_memory_off_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "state.tokens.key").write_text(Fernet.generate_key().decode())
    (tmp_path / "state.tokens.key").chmod(0o644)
    failures: list[str] = []
    async with open_state_store(f"sqlite:///{tmp_path / 'state.db'}", ROOMY, failures.append) as store:
        assert store is None
    assert failures == ["the key file that seals it cannot be used (the log says why): memory is off until the "
                        "gateway restarts"]


async def test_redis_without_the_key_setting_does_not_open() -> None:
    with pytest.raises(TokenKeyError, match="TOOLBRIDGE_TOKEN_KEY must be set when TOOLBRIDGE_STATE_URL is redis"):
        async with open_state_store("redis://127.0.0.1:9/0", ROOMY):
            pass


def test_the_secret_is_the_setting_or_the_file_or_this_process_own(tmp_path: Path) -> None:
    key = Fernet.generate_key()
    assert gateway_key("redis://127.0.0.1:9/0", key.decode()) == key
    url = f"sqlite:///{tmp_path / 'state.db'}"
    assert gateway_key(url, None) == gateway_key(url, None) == (tmp_path / "state.tokens.key").read_bytes().strip()
    assert gateway_key("memory://", None) != gateway_key("memory://", None)
