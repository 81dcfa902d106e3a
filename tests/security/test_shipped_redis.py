"""Audit 2026-11-27, S1 and K3 (security.md S1, docker.md K3): the Redis of docker-compose.yml's scale profile and of
deploy/kubernetes/ had no password, and the manifests no NetworkPolicy.

The attacker is another container on the compose network (Open WebUI's among them) or any pod of the cluster. It
connects to Redis without the password, or with a wrong one, and tries to list what is stored (waiting turns,
memory, sign-ins), read a conversation's tool results, and write a verdict where the status page's `approve` goes
(the audit's redis_verdict.py ran a delete nobody approved that way). In Kubernetes it also tries to reach Redis at
all from a pod that is not a gateway, and the gateway without going through the ingress. Last, it looks for the
password where an operator's log and a /health answer go.

Real redis-server, run from each file's own command line (tests/support/deployment.py); a real gateway with the
state URL each file gives it.
"""

from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from tests.support.deployment import (
    ONCE,
    SECRETS,
    Peer,
    ShippedRedis,
    compose_container_env,
    compose_services,
    container_env,
    gateway_container,
    ingress_allowed,
    manifest_redis,
    workload,
)
from tests.support.fake_upstream import FakeUpstream, Turn
from tests.test_cli import clean_env, toolbridge, write_config

PASSWORD = "c0ffee" * 10
TOKEN_KEY = SECRETS["toolbridge-keys"]["token-key"]
DOTENV = {"REDIS_PASSWORD": PASSWORD, "TOOLBRIDGE_TOKEN_KEY": TOKEN_KEY}
VERDICT = "toolbridge:v1:verdict:" + "0" * 64


def _attacked(server: ShippedRedis, gateway_url: str) -> None:
    """What a client without the password, or with a wrong one, gets; and that the gateway's URL still works."""
    server.start()
    try:
        for password in (None, "guessed"):
            with redis.Redis(port=server.port, password=password, socket_timeout=5, retry=ONCE) as attacker:
                with pytest.raises(redis.AuthenticationError):
                    attacker.keys("toolbridge:*")
                with pytest.raises(redis.AuthenticationError):
                    attacker.set(VERDICT, b"approve")
        with redis.Redis.from_url(server.url(gateway_url), socket_timeout=5) as gateway:
            assert gateway.get(VERDICT) is None  # nothing got written
            assert gateway.set("toolbridge:v1:probe", b"ok")
    finally:
        server.stop()


def test_compose_redis_refuses_a_client_without_the_password(tmp_path: Path) -> None:
    services = compose_services(DOTENV)
    service = services["redis"]
    server = ShippedRedis(service["command"], tmp_path / "redis-data", service.get("environment", {}))
    _attacked(server, compose_container_env(services["toolbridge-replica"])["TOOLBRIDGE_STATE_URL"])


def test_kubernetes_redis_refuses_a_client_without_the_password(tmp_path: Path) -> None:
    env = container_env(gateway_container(), "tools", SECRETS)
    _attacked(manifest_redis(tmp_path / "redis-data"), env["TOOLBRIDGE_STATE_URL"])


def _pod(kind_name: str, namespace: str = "tools") -> Peer:
    labels: dict[str, Any] = workload(kind_name)["spec"]["template"]["metadata"]["labels"]
    return Peer(labels, {"kubernetes.io/metadata.name": namespace})


def test_only_the_gateways_pods_reach_redis_and_only_the_ingress_reaches_the_gateway() -> None:
    gateway, redis_pod = _pod("toolbridge"), _pod("toolbridge-redis")
    open_webui = Peer({"app": "open-webui"}, gateway.namespace)
    elsewhere = Peer({"app": "toolbridge"}, {"kubernetes.io/metadata.name": "someone-else"})
    ingress = Peer({"app.kubernetes.io/name": "ingress-nginx"}, {"kubernetes.io/metadata.name": "ingress-nginx"})
    assert ingress_allowed(redis_pod, gateway, 6379)
    for source in (open_webui, elsewhere, ingress):
        assert not ingress_allowed(redis_pod, source, 6379), source
    assert ingress_allowed(gateway, ingress, 8000)
    for source in (open_webui, redis_pod, elsewhere):
        assert not ingress_allowed(gateway, source, 8000), source


@pytest.mark.parametrize("right", [True, False], ids=["right", "wrong"])
def test_the_redis_password_is_in_no_log_line_or_answer(tmp_path: Path, upstream: FakeUpstream, right: bool) -> None:
    """The password is in TOOLBRIDGE_STATE_URL: with the right one (a chat stored in memory, a debug log) and a
    wrong one (every store call failing, /health degraded and saying why), neither the log nor an answer shows it."""
    server = manifest_redis(tmp_path / "redis-data")
    shipped = SECRETS["toolbridge-keys"]["redis-password"]
    password = shipped if right else f"wrong{shipped}"
    url = server.url(container_env(gateway_container(), "tools", SECRETS)["TOOLBRIDGE_STATE_URL"]).replace(
        shipped, password)
    key = "sk-" + "k" * 20
    env = clean_env() | {"TOOLBRIDGE_STATE_URL": url, "TOOLBRIDGE_TOKEN_KEY": TOKEN_KEY, "TOOLBRIDGE_API_KEYS": key,
                         "TOOLBRIDGE_UPSTREAM_URL": f"{upstream.url}/v1", "TOOLBRIDGE_LOG_LEVEL": "debug",
                         "TOOLBRIDGE_LOG_FORMAT": "json"}
    upstream.script(Turn(content="stored"), Turn(content="stored again"))
    server.start()
    answers: list[str] = []
    try:
        with toolbridge(tmp_path, write_config(tmp_path, {}), env=env, key=key) as (_gateway, base):
            headers = {"Authorization": f"Bearer {key}"}
            for text in ("hello", "again"):
                chat = httpx.post(f"{base}/v1/chat/completions", headers=headers, timeout=30, json={
                    "model": "m", "messages": [{"role": "user", "content": text}]})
                answers.append(chat.text)
            for path in ("/health", "/ui/health", "/ui/requests", "/metrics"):
                answers.append(httpx.get(f"{base}{path}", headers=headers, timeout=30).text)
    finally:
        server.stop()
    health = answers[2]
    assert ('"degraded"' in health) != right  # the wrong password was noticed, and said
    log = (tmp_path / "gateway.log").read_text()
    for text in (log, *answers):
        assert password not in text
