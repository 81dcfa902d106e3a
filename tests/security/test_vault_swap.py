"""Sign-ins moved between names in the vault (found while sealing the store for issue 43's S1): the vault's values
were encrypted (Fernet) but not bound to their names, so whoever can write to the store (Redis on a network, the
SQLite file) could copy one identity's tokens under another's name: a `per_key` server's tokens of one key under
another key's, and that key's calls then acted as the first person. The attacker here swaps the sign-ins of two
keys in the vault's SQLite file between two runs of the gateway; each key must find no sign-in, never the other's.
"""

import sqlite3
from pathlib import Path

from tests.support.fake_upstream import FakeUpstream
from tests.support.oauth_servers import OAuthPair
from tests.test_sign_in import Person
from tests.test_sign_in_per_key import ALICE, BOB, pair, start, wait_state, whoami

__all__ = ["pair"]  # the fixture, used by name


def swap_sign_ins(vault_file: Path) -> None:
    """What write access to the store can do: each identity's stored value moved under the other's name."""
    with sqlite3.connect(vault_file) as db:
        rows = db.execute("SELECT name, value FROM secrets WHERE name LIKE 'oauth/protected/%'").fetchall()
        assert len(rows) == 2, rows
        (first, first_value), (second, second_value) = rows
        db.execute("UPDATE secrets SET value = ? WHERE name = ?", (second_value, first))
        db.execute("UPDATE secrets SET value = ? WHERE name = ?", (first_value, second))


def test_a_sign_in_moved_under_another_keys_name_signs_nobody_in(
    tmp_path: Path, upstream: FakeUpstream, pair: OAuthPair
) -> None:
    with start(tmp_path, upstream, pair) as gateway:
        for key, person in ((ALICE, "alice"), (BOB, "bob")):
            wait_state(gateway, key, "needs_sign_in")
            assert Person(gateway, key).sign_in("protected", user=person).status_code == 303
            wait_state(gateway, key, "ready")
        assert (whoami(gateway, upstream, ALICE), whoami(gateway, upstream, BOB)) == ("alice", "bob")
    swap_sign_ins(tmp_path / "state.tokens.db")
    with start(tmp_path, upstream, pair) as gateway:
        for key in (ALICE, BOB):
            assert wait_state(gateway, key, "needs_sign_in")["signed_in"] is False  # not the other's identity
        assert Person(gateway, BOB).sign_in("protected", user="bob").status_code == 303  # signing in again works
        assert wait_state(gateway, BOB, "ready")["signed_in"] is True
        assert whoami(gateway, upstream, BOB) == "bob"
