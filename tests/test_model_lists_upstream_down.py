"""Model lists while the model server is down (issue 45, C1): Open WebUI dropped the model when `/v1/models` (or
`/api/tags`) answered 502, and so never sent the chat that carries the gateway's "start LM Studio". Every door's
list answers with the last list the upstream gave, with the toolsets' virtual models as each key may use them;
the chat then reads why. Kept in the state store: a restart keeps it, and a replica that never saw the upstream
serves another's (a real redis-server). The upstream's own 4xx, and a list never fetched, stay as they were.

A real FakeUpstream that is stopped and started again on its port, real gateways, the openai SDK as the client.
"""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import MODEL
from tests.support.model_server import ModelServer
from tests.support.replica_services import RedisServer

OPS, ALICE = "sk-ops-5e1f", "sk-alice-93b2"
HINT = "Start LM Studio's local server"
LAST_KNOWN = "x-toolbridge-model-list"
TOOLSETS = {"echoes": ["basic"], "notes": ["files"]}
ASK = [{"role": "user", "content": "hello"}]


@pytest.fixture
def model() -> Iterator[ModelServer]:
    server = ModelServer().start()
    yield server
    server.stop()


def keys_file(path: Path) -> Path:
    path.write_text(json.dumps({"keys": {ALICE: {"servers": ["basic"], "name": "alice"}}}))
    return path


def listed(gateway: Gateway, key: str | None = None, **headers: str) -> tuple[httpx.Response, list[str]]:
    """`/v1/models` and its ids (Anthropic's shape with an anthropic-version header)."""
    sent = headers | ({"Authorization": f"Bearer {key}"} if key else {})
    response = httpx.get(f"{gateway.url}/v1/models", headers=sent, timeout=30)
    return response, [entry["id"] for entry in response.json().get("data", [])]


def tags(gateway: Gateway, key: str) -> list[str]:
    response = httpx.get(f"{gateway.url}/api/tags", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert response.status_code == 200, response.text
    return [entry["name"] for entry in response.json()["models"]]


def health(gateway: Gateway, key: str | None = None) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    body: dict[str, Any] = httpx.get(f"{gateway.url}/health", headers=headers, timeout=30).json()
    return body


def test_while_the_model_server_is_down_every_door_lists_its_last_models_and_the_chat_says_why(
    model: ModelServer, tmp_path: Path
) -> None:
    servers = {"basic": stdio_entry("basic.py"), "files": stdio_entry("files.py")}
    everything = [MODEL, f"{MODEL}+echoes", f"{MODEL}+notes"]
    with running_gateway(tmp_path, servers, ready=("basic", "files"), key=OPS, upstream_url=model.base,
                         api_keys=OPS, toolsets=TOOLSETS, keys_file=keys_file(tmp_path / "keys.json")) as gateway:
        assert listed(gateway, OPS)[1] == everything
        model.stop()
        for key, models in ((OPS, everything), (ALICE, [MODEL, f"{MODEL}+echoes"])):  # Alice: the basic server
            response, ids = listed(gateway, key)
            assert (response.status_code, ids) == (200, models)
            assert response.headers[LAST_KNOWN].startswith("last-known; fetched_at=")
            assert listed(gateway, key, **{"anthropic-version": "2023-06-01"})[1] == models
            assert tags(gateway, key) == models
        with pytest.raises(openai.InternalServerError, match=HINT):
            gateway.client(ALICE).chat.completions.create(model=MODEL, messages=ASK)
        seen = health(gateway, OPS)
        assert seen["status"] == "degraded" and health(gateway)["status"] == "degraded"
        assert seen["upstream"]["reachable"] is False and HINT in seen["upstream"]["error"]
        assert seen["upstream"]["model_list"]["served"] == "last_known"
        model.start()
        response, ids = listed(gateway, OPS)
        assert (response.status_code, ids, LAST_KNOWN in response.headers) == (200, everything, False)
        assert health(gateway, OPS)["upstream"]["model_list"]["served"] == "live"
        model.refuse = True  # the upstream's own refusal is its answer, not a reason to answer for it
        response, _ = listed(gateway, OPS)
        assert response.status_code == 401 and response.json()["error"]["message"] == "Invalid API key"
        assert httpx.get(f"{gateway.url}/api/tags", headers={"Authorization": f"Bearer {OPS}"}).status_code == 502


def test_a_restart_keeps_the_last_list_and_a_list_never_fetched_stays_a_502(
    model: ModelServer, tmp_path: Path
) -> None:
    model.stop()
    (tmp_path / "fresh").mkdir()
    with running_gateway(tmp_path / "fresh", upstream_url=model.base) as gateway:
        response, _ = listed(gateway)
        assert response.status_code == 502 and HINT in response.json()["error"]["message"]
    model.start()
    with running_gateway(tmp_path, upstream_url=model.base) as gateway:
        assert listed(gateway)[1] == [MODEL]
    model.stop()
    with running_gateway(tmp_path, upstream_url=model.base) as gateway:  # the same state file, the upstream down
        response, ids = listed(gateway)
        assert (response.status_code, ids) == (200, [MODEL])
        assert response.headers[LAST_KNOWN].startswith("last-known")


def test_a_replica_that_never_saw_the_model_server_serves_the_list_another_kept(
    model: ModelServer, tmp_path: Path, redis_server: RedisServer
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with running_gateway(tmp_path / "a", upstream_url=model.base, state_url=redis_server.url) as first:
        assert listed(first)[1] == [MODEL]
    model.stop()
    with running_gateway(tmp_path / "b", upstream_url=model.base, state_url=redis_server.url) as second:
        response, ids = listed(second)
        assert (response.status_code, ids) == (200, [MODEL])
        assert response.headers[LAST_KNOWN].startswith("last-known")
