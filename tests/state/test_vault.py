"""The token vault over each backend it has (process memory, its own SQLite file, Redis): values replaced and
deleted, never in plaintext where they rest, a changed key read as absent, and the start-up the state URL's
kind calls for; a name held by one holder at a time (across replicas on Redis)."""

import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from cryptography.fernet import Fernet
from structlog.testing import capture_logs

from app.state import MemoryVaultBackend, StateStoreError, TokenKeyError, Vault, open_vault
from app.state.vault_redis import HOLDS, PREFIX, RedisVaultBackend
from app.state.vault_sqlite import SqliteVaultBackend
from tests.support.replica_services import RedisServer

pytestmark = pytest.mark.anyio
KEY = Fernet.generate_key()


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def vault(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Vault]:
    if request.param == "memory":
        vault = Vault(MemoryVaultBackend(), KEY)
    elif request.param == "sqlite":
        backend = SqliteVaultBackend(tmp_path / "state.tokens.db")
        await backend.open()
        vault = Vault(backend, KEY)
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        server.client().flushdb()
        vault = Vault(RedisVaultBackend(server.url), KEY)
    yield vault
    await vault.aclose()


async def test_a_value_is_replaced_by_the_next_put_and_gone_after_delete(vault: Vault) -> None:
    assert await vault.get("oauth/github/gateway") is None
    await vault.put("oauth/github/gateway", {"tokens": {"access_token": "one"}})
    await vault.put("oauth/github/gateway", {"tokens": {"access_token": "two"}, "expires_at": 1.5})
    assert await vault.get("oauth/github/gateway") == {"tokens": {"access_token": "two"}, "expires_at": 1.5}
    await vault.put("oauth/notion/alice", {"tokens": {}})
    await vault.put("oauth/notion/bob", {"tokens": {}})
    assert await vault.names("oauth/notion/") == ["oauth/notion/alice", "oauth/notion/bob"]
    assert await vault.names("oauth/%") == []  # a prefix's own wildcard characters are plain
    await vault.delete("oauth/github/gateway")
    await vault.delete("oauth/github/gateway")  # twice: nothing to delete is no error
    assert await vault.get("oauth/github/gateway") is None
    assert await vault.names("") == ["oauth/notion/alice", "oauth/notion/bob"]


async def test_many_values_are_all_kept(vault: Vault) -> None:
    # Unlike conversation memory, nothing is evicted to make room.
    for number in range(200):
        await vault.put(f"oauth/server{number}/gateway", {"tokens": {"access_token": "x" * 2_000}})
    assert len(await vault.names("oauth/")) == 200
    assert await vault.get("oauth/server0/gateway") == {"tokens": {"access_token": "x" * 2_000}}


async def test_a_value_under_another_key_is_absent_and_logged_once_without_it(vault: Vault) -> None:
    canary = "canary-" + secrets.token_hex(16)
    await vault.put("oauth/github/gateway", {"tokens": {"access_token": canary}})
    rekeyed = Vault(vault.backend, Fernet.generate_key())
    with capture_logs() as logs:
        assert await rekeyed.get("oauth/github/gateway") is None
        assert await rekeyed.get("oauth/github/gateway") is None
    assert [entry["event"] for entry in logs] == ["vault_value_unreadable"]
    assert logs[0]["name"] == "oauth/github/gateway" and canary not in repr(logs)
    await rekeyed.put("oauth/github/gateway", {"tokens": {"access_token": "new"}})  # signing in again
    assert await rekeyed.get("oauth/github/gateway") == {"tokens": {"access_token": "new"}}


async def test_a_token_never_rests_in_plaintext_in_the_sqlite_file(tmp_path: Path) -> None:
    canary = "canary-" + secrets.token_hex(16)
    state = tmp_path / "data" / "state.db"
    async with open_vault(f"sqlite:///{state}") as vault:
        for number in range(3):  # replaced twice: no older copy left behind either
            await vault.put("oauth/github/gateway", {"tokens": {"access_token": f"{canary}-{number}"}})
        files = sorted(path.name for path in state.parent.iterdir())
        assert "state.tokens.db" in files and "state.db" not in files  # a file of its own
        rest = b"".join(path.read_bytes() for path in state.parent.iterdir())
        assert await vault.get("oauth/github/gateway") == {"tokens": {"access_token": f"{canary}-2"}}
    assert canary.encode() not in rest and len(rest) > 0
    assert (state.parent / "state.tokens.db").stat().st_mode & 0o777 == 0o600
    async with open_vault(f"sqlite:///{state}") as vault:  # a restart reads them back with the kept key
        assert await vault.get("oauth/github/gateway") == {"tokens": {"access_token": f"{canary}-2"}}


async def test_a_token_never_rests_in_plaintext_in_redis(redis_server: RedisServer) -> None:
    canary = "canary-" + secrets.token_hex(16)
    async with open_vault(redis_server.url, KEY.decode()) as vault:
        await vault.put("oauth/github/gateway", {"tokens": {"access_token": canary}})
        raw = redis_server.client().get(PREFIX + "oauth/github/gateway")
        assert raw is not None and canary.encode() not in raw
        assert redis_server.client().ttl(PREFIX + "oauth/github/gateway") == -1  # kept until deleted
        assert Fernet(KEY).decrypt(raw) == b'oauth/github/gateway\0{"tokens":{"access_token":"%s"}}' % canary.encode()
    async with open_vault(redis_server.url, KEY.decode()) as replica:  # another replica, the same key
        assert await replica.get("oauth/github/gateway") == {"tokens": {"access_token": canary}}


async def test_with_redis_the_key_setting_is_required(redis_server: RedisServer) -> None:
    with pytest.raises(TokenKeyError, match="TOOLBRIDGE_TOKEN_KEY must be set when TOOLBRIDGE_STATE_URL is redis"):
        async with open_vault(redis_server.url, None):
            pass


async def test_a_key_setting_that_is_no_fernet_key_is_refused() -> None:
    with pytest.raises(TokenKeyError, match="TOOLBRIDGE_TOKEN_KEY is not a Fernet key") as raised:
        async with open_vault("memory://", "not-a-key"):
            pass
    assert "not-a-key" not in str(raised.value)


@pytest.mark.parametrize("url", ["memory://", "none"])
async def test_without_a_file_the_vault_is_this_process_memory(url: str, tmp_path: Path) -> None:
    async with open_vault(url) as vault:
        assert vault.kind == "memory"
        await vault.put("oauth/github/gateway", {"tokens": {}})
        assert await vault.get("oauth/github/gateway") == {"tokens": {}}


async def test_the_key_setting_wins_over_the_key_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    async with open_vault(url, KEY.decode()) as vault:
        await vault.put("oauth/github/gateway", {"tokens": {}})
    assert not (tmp_path / "state.tokens.key").exists()
    async with open_vault(url) as vault:  # the key setting removed: a new key, the old value unreadable
        assert await vault.get("oauth/github/gateway") is None
    assert (tmp_path / "state.tokens.key").exists()


async def test_a_sqlite_file_that_cannot_be_opened_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "state.tokens.db").mkdir()
    with pytest.raises(StateStoreError):
        async with open_vault(f"sqlite:///{tmp_path / 'state.db'}", KEY.decode()):
            pass


async def test_a_held_name_has_one_holder_at_a_time_and_the_next_gets_it_when_it_lets_go(vault: Vault) -> None:
    order: list[str] = []
    first_in, let_go = anyio.Event(), anyio.Event()

    async def first() -> None:
        async with vault.holding("refresh/oauth/github/gateway", 10):
            order.append("first in")
            first_in.set()
            await let_go.wait()
            order.append("first out")

    async def second() -> None:
        await first_in.wait()
        async with vault.holding("refresh/oauth/github/gateway", 10):
            order.append("second in")

    async with anyio.create_task_group() as group:
        group.start_soon(first)
        group.start_soon(second)
        await first_in.wait()
        async with vault.holding("refresh/oauth/notion/gateway", 10):  # another name is not held
            order.append("other name")
        let_go.set()
    assert order == ["first in", "other name", "first out", "second in"]
    async with vault.holding("refresh/oauth/github/gateway", 10):  # let go, even after a failure inside
        pass


async def test_a_name_held_past_the_wait_is_a_store_error(vault: Vault) -> None:
    async with vault.holding("refresh/x", 10):
        with pytest.raises(StateStoreError, match="stayed held"):
            async with vault.holding("refresh/x", 0.2):
                pass
    with pytest.raises(RuntimeError):
        async with vault.holding("refresh/x", 10):
            raise RuntimeError("the work failed")
    async with vault.holding("refresh/x", 0.2):  # let go all the same
        pass


async def test_replicas_on_one_redis_hold_a_name_in_turn_and_a_dead_holders_hold_expires(
    redis_server: RedisServer,
) -> None:
    async with open_vault(redis_server.url, KEY.decode()) as a, open_vault(redis_server.url, KEY.decode()) as b:
        async with a.holding("refresh/oauth/github/gateway", 10):
            assert redis_server.client().pttl(HOLDS + "refresh/oauth/github/gateway") > 9_000
            with pytest.raises(StateStoreError, match="stayed held"):
                async with b.holding("refresh/oauth/github/gateway", 0.1):
                    pass
        assert redis_server.client().get(HOLDS + "refresh/oauth/github/gateway") is None
        # A replica that died holding it: its hold expires by itself, and the next takes it then.
        redis_server.client().set(HOLDS + "refresh/oauth/github/gateway", "dead-replica", px=300)
        async with b.holding("refresh/oauth/github/gateway", 5):
            assert redis_server.client().get(HOLDS + "refresh/oauth/github/gateway") != b"dead-replica"
        assert await a.names("") == []  # holds are not among the vault's names


async def test_a_value_moved_under_another_name_is_absent_and_logged_once_without_it(vault: Vault) -> None:
    canary = "canary-" + secrets.token_hex(16)
    await vault.put("oauth/notes/operator", {"tokens": {"access_token": canary}})
    await vault.backend.write("oauth/notes/limited", await vault.backend.read("oauth/notes/operator") or b"")
    with capture_logs() as logs:
        assert await vault.get("oauth/notes/limited") is None
        assert await vault.get("oauth/notes/limited") is None
    assert [entry["event"] for entry in logs] == ["vault_value_unreadable"] and canary not in repr(logs)
    assert await vault.get("oauth/notes/operator") == {"tokens": {"access_token": canary}}


async def test_a_value_sealed_before_names_were_bound_is_absent(vault: Vault) -> None:
    await vault.backend.write("oauth/notes/gateway", Fernet(KEY).encrypt(b'{"tokens": {}}'))
    assert await vault.get("oauth/notes/gateway") is None
