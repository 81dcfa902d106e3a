"""S8 of the 2026-11-27 audit: another key could push a key's waiting rounds off the status page. The list behind
`GET /ui/waiting` (app/ops/waiting_rounds.py) was one list of 200 for all keys: each key saw its own alone, but
all shared the room, so bob (a key limited to one server) asked 200 rounds in 3.8 s and alice's were gone from
her page (her chat could still answer, her page's Approve and Deny could not).

The attacker asks for 200 deletions that wait for a yes. Now each owner has a share of its own, its oldest leaving
first: alice's rounds stay listed, and she can still decide them on the page. Real HTTP with the openai SDK and
the page's own requests (the key as a Basic password), a real stdio server (files.py: `delete_note` asks first)."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.ops.waiting_rounds import WAITING_PER_OWNER
from tests.chat.memory.test_memory import ask
from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import Call, FakeUpstream, Turn

ALICE, BOB = "sk-alice-page-1", "sk-bob-page-2"
FLOOD = 200  # the audit's


@pytest.fixture
def gateway(upstream: FakeUpstream, tmp_path: Path) -> Iterator[Gateway]:
    keys = {ALICE: {"servers": "*", "name": "alice"}, BOB: {"servers": ["files"], "name": "bob"}}
    (tmp_path / "keys.json").write_text(json.dumps({"keys": keys}))
    with running_gateway(tmp_path, {"files": stdio_entry("files.py")}, ready=["files"], key=ALICE,
                         upstream_url=f"{upstream.url}/v1", tool_trace="off", keys_file=tmp_path / "keys.json") as gw:
        yield gw


def ask_to_delete(gateway: Gateway, upstream: FakeUpstream, key: str, name: str) -> None:
    upstream.script(Turn(calls=[Call("files__delete_note", {"name": name})]))
    question = ask(gateway.client(key), [{"role": "user", "content": f"Delete {name}."}], stream=False)
    assert "Approval" in question, question


def page(gateway: Gateway, key: str) -> httpx.Client:
    return httpx.Client(base_url=gateway.url, auth=("", key), timeout=30)


def listed(gateway: Gateway, key: str) -> list[str]:
    """The notes whose deletion the key's page lists as waiting, oldest first."""
    with page(gateway, key) as client:
        rounds: list[dict[str, Any]] = client.get("/ui/waiting").json()["data"]
    return [json.loads(held["calls"][0]["arguments"])["name"] for held in rounds]


def test_another_keys_flood_leaves_a_keys_waiting_rounds_on_its_page(gateway: Gateway, upstream: FakeUpstream) -> None:
    for name in ("alice-1", "alice-2"):
        ask_to_delete(gateway, upstream, ALICE, name)
    for number in range(FLOOD):
        ask_to_delete(gateway, upstream, BOB, f"bob-{number}")
    assert listed(gateway, ALICE) == ["alice-1", "alice-2"]
    # Bob's own share: his oldest went first.
    assert listed(gateway, BOB) == [f"bob-{number}" for number in range(FLOOD - WAITING_PER_OWNER, FLOOD)]
    with page(gateway, ALICE) as client:
        first = client.get("/ui/waiting").json()["data"][0]["id"]
        decided = client.post(f"/ui/waiting/{first}", json={"verdict": "deny"})
    assert decided.status_code == 200 and decided.json() == {"id": first, "decided": "deny"}
