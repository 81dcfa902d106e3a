"""S7 (audit 2026-11-27, low-medium): starting 101 sign-ins wiped everyone's pending sign-in.

A sign-in is two requests of a person's browser: its start leaves a pending record (the PKCE verifier, whose
sign-in) for the way back, ten minutes at most. Past 100 pending records the gateway deleted every one of them.
The attacker holds any key that may use a server a person signs in to (here a `per_key` server, where every key
signs itself in): it clicks Sign in 101 times, and the sign-in another person has open at the authorization
server's consent page ends in "finished already, or it expired". Each click also made the gateway ask the
authorization server again (its metadata; a registration after a change of address), 0.9 s a click in the audit.

Over real HTTP to a running gateway, against the real authorization server and protected MCP server of
tests/support/oauth_servers.py: after a key's 101 starts, another key's pending sign-in finishes, the flooding
key's own oldest are the ones dropped (its latest still finishes), and the authorization server was asked for its
metadata once for those 101 starts, not 101 times."""

import json
from pathlib import Path

import anyio
import httpx

from app.mcp.sign_in import MOST_PENDING, PENDING
from app.state.vault_open import open_vault
from tests.conftest import running_gateway
from tests.support.fake_upstream import FakeUpstream
from tests.support.oauth_servers import OAuthPair
from tests.test_sign_in import Person, wait_state

ALICE, CAROL = "sk-alice-pending-1a2b", "sk-carol-flooding-3c4d"
METADATA = "/.well-known/oauth-authorization-server"


def pending_records(state_db: Path) -> int:
    async def count() -> int:
        async with open_vault(f"sqlite:///{state_db}") as vault:
            return len(await vault.names(PENDING))

    return anyio.run(count)


def test_a_keys_flood_of_started_sign_ins_leaves_another_keys_pending_one_intact(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"keys": {ALICE: {"servers": ["protected"], "name": "alice"},
                                         CAROL: {"servers": ["protected"], "name": "carol"}}}))
    with OAuthPair.start() as pair:
        server = {"url": pair.mcp_server.mcp_url, "oauth": {"per_key": True}}
        with running_gateway(tmp_path, {"protected": server}, upstream_url=f"{upstream.url}/v1", tool_trace="off",
                             keys_file=keys) as gateway:
            wait_state(gateway, "protected", "needs_sign_in", key=ALICE)
            alice = Person(gateway, ALICE)
            started = alice.start("protected")
            assert started.status_code == 303
            alice_way_back = alice.consent(started.headers["location"], user="alice")  # at the consent page

            asked = pair.authorization_server.requests[METADATA]
            carols_first, carol, carols_last = Person(gateway, CAROL), Person(gateway, CAROL), Person(gateway, CAROL)
            starts = [carols_first.start("protected"), *(carol.start("protected") for _ in range(99)),
                      carols_last.start("protected")]
            assert {answer.status_code for answer in starts} == {303}
            assert pair.authorization_server.requests[METADATA] - asked <= 1  # her first start's discovery only
            assert pending_records(tmp_path / "state.db") <= MOST_PENDING + 1  # hers, bounded, and alice's

            back = alice.back(alice_way_back)
            assert back.status_code == 303, back.text
            assert wait_state(gateway, "protected", "ready", key=ALICE)["signed_in"] is True
            played = httpx.post(f"{gateway.url}/ui/playground", json={"tool": "protected__whoami"}, timeout=30,
                                headers={"Authorization": f"Bearer {ALICE}"})
            assert json.loads(played.json()["content"])["data"]["result"] == "alice"

            dropped = carols_first.back(carols_first.consent(starts[0].headers["location"], user="carol"))
            assert dropped.status_code == 400 and "finished already, or it expired" in dropped.text
            kept = carols_last.back(carols_last.consent(starts[-1].headers["location"], user="carol"))
            assert kept.status_code == 303, kept.text
