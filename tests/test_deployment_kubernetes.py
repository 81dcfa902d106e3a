"""deploy/kubernetes/ as a cluster would run it (issue 44): kubelet's probes through the gateway's own Host guard,
the environment each pod gets from the Secret, Redis run from its manifest's command line and probed as kubelet
probes it, and the hardening a restricted namespace asks for. There is no cluster here: kubelet's part is done as
its code does it (tests/support/deployment.py); the gateway and Redis are real."""

import importlib.metadata
import json
import re
import shlex
import subprocess
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
import redis

from app import __version__
from app.main import create_app
from app.state.token_key import key_from_setting
from tests.conftest import wait_for_health
from tests.support.deployment import (
    ROOT,
    SECRETS,
    MissingSecret,
    ShippedRedis,
    assert_gateway_starts,
    container_env,
    find,
    gateway_container,
    image_container_env,
    kubelet_expand,
    manifest_redis,
    pod_spec,
    probe_passes,
    probe_request,
    redis_container,
    settings_from,
)
from tests.support.fake_upstream import FakeUpstream
from tests.support.servers import ServerThread

POD_IP = "10.244.1.17"
IDLE_GATEWAY_MIB = 140  # the audit's `docker stats` of an idle gateway with the time server
LAUNCHERS = {"npx", "uvx", "uv", "pipx", "bunx", "docker", "podman"}  # commands that fetch a server when they start


@contextmanager
def running_redis(tmp_path: Path) -> Iterator[ShippedRedis]:
    """The StatefulSet's Redis, started, its data where the claim would be."""
    server = manifest_redis(tmp_path / "redis-data")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def manifest_gateway(tmp_path: Path, namespace: str, redis_server: ShippedRedis, upstream_url: str
                     ) -> Iterator[tuple[ServerThread, dict[str, str]]]:
    """A gateway with a pod's environment in `namespace`: the cluster's names made this machine's (Redis, the
    model server), the ConfigMap's mcp.json where the pod mounts it."""
    env = image_container_env(gateway_container(), namespace, SECRETS)
    config = tmp_path / "mcp.json"
    config.write_text(find("ConfigMap", "toolbridge-mcp")["data"]["mcp.json"])
    settings = settings_from(env, state_url=redis_server.url(env["TOOLBRIDGE_STATE_URL"]), mcp_config=str(config),
                             upstream_url=f"{upstream_url}/v1")
    with ServerThread(create_app(settings)) as thread:
        yield thread, env


@pytest.mark.parametrize("namespace", ["default", "tools"])
def test_kubelets_probes_pass_the_host_guard_in_any_namespace(
    tmp_path: Path, upstream: FakeUpstream, namespace: str
) -> None:
    """The audit's K1: kubelet sends the pod's IP as the Host; the guard answered 403, so pods were never Ready and
    were restarted every 2 minutes. And the allowed names were the `default` namespace's."""
    with running_redis(tmp_path) as redis_server, \
            manifest_gateway(tmp_path, namespace, redis_server, upstream.url) as (gateway, env):
        for kind in ("readinessProbe", "livenessProbe"):
            probe = probe_request(gateway_container()[kind], POD_IP, 8000)
            answer = httpx.get(f"{gateway.url}{probe.path}", headers=probe.headers)
            assert probe_passes(answer.status_code), (kind, answer.text)

        def status(host: str) -> int:
            return httpx.get(f"{gateway.url}/health", headers={"Host": host}).status_code

        # Clients: the Service by every name it has in its namespace, and people through the Ingress.
        ingress_host = find("Ingress", "toolbridge")["spec"]["rules"][0]["host"]
        for host in ("toolbridge:8000", f"toolbridge.{namespace}:8000", f"toolbridge.{namespace}.svc:8000",
                     f"toolbridge.{namespace}.svc.cluster.local:8000", ingress_host):
            assert status(host) == 200, host
        # What the guard is for stays refused: other names, and the pod's own address.
        for host in (f"{POD_IP}:8000", "toolbridge.elsewhere.svc.cluster.local:8000", "evil.example"):
            assert status(host) == 403, host
        # The key from the Secret, Redis with its password, and the ConfigMap's server from what is installed.
        body = wait_for_health(gateway.url, lambda b: b.get("status") == "ok", key=env["TOOLBRIDGE_API_KEYS"])
        assert body["memory"]["store"] == "redis" and "error" not in body["memory"]


def test_every_pod_gets_the_token_key_from_the_secret_and_none_starts_without_it() -> None:
    """The audit's K2: no pod was given TOOLBRIDGE_TOKEN_KEY, so with Redis a gateway whose mcp.json has an OAuth
    server exited 3 at start, in a restart loop."""
    env = container_env(gateway_container(), "tools", SECRETS)
    assert env.get("TOOLBRIDGE_TOKEN_KEY") == SECRETS["toolbridge-keys"]["token-key"]
    assert urlsplit(env["TOOLBRIDGE_STATE_URL"]).password == SECRETS["toolbridge-keys"]["redis-password"]
    without = {"toolbridge-keys": {k: v for k, v in SECRETS["toolbridge-keys"].items() if k != "token-key"}}
    with pytest.raises(MissingSecret):
        container_env(gateway_container(), "tools", without)


def test_the_headers_commands_make_a_secret_the_gateway_and_redis_accept() -> None:
    """The Secret as toolbridge.yaml's header makes it: its commands run, their values checked as the gateway checks
    them (the token key as token_key.py reads it), and the password safe in a URL as it is."""
    header = "\n".join(line.removeprefix("#").strip() for line in (ROOT / "deploy" / "kubernetes" / "toolbridge.yaml")
                       .read_text().splitlines() if line.startswith("#"))
    literals = dict(re.findall(r'--from-literal=([\w-]+)="\$\((.+?)\)"(?= \\|$)', header, re.MULTILINE))
    assert set(literals) == set(SECRETS["toolbridge-keys"])
    made = {name: subprocess.run(shlex.split(command), capture_output=True, text=True, check=True, timeout=30)
            .stdout.strip() for name, command in literals.items()}
    key_from_setting(made["token-key"])
    assert re.fullmatch(r"[0-9a-f]{64}", made["redis-password"])
    assert made["api-keys"] and "," not in made["api-keys"]


def test_a_pod_starts_with_an_oauth_server_and_redis(tmp_path: Path) -> None:
    """K2's effect, run: the gateway with a pod's environment and an OAuth server in mcp.json starts (it exited 3)."""
    with running_redis(tmp_path) as redis_server:
        env = image_container_env(gateway_container(), "tools", SECRETS)
        assert_gateway_starts(tmp_path, env | {"TOOLBRIDGE_STATE_URL": redis_server.url(env["TOOLBRIDGE_STATE_URL"])})


def test_redis_keeps_the_sign_ins_when_its_pod_is_replaced_and_its_probes_need_the_password(tmp_path: Path) -> None:
    """The audit's K3: Redis ran without persistence, so a rescheduled pod or a drained node signed everyone out.
    And `redis-cli ping` exits 0 on NOAUTH too: the probes must see PONG."""
    env = container_env(redis_container(), "tools", SECRETS)
    args = [kubelet_expand(arg, env) for arg in redis_container().get("args", [])]
    assert {"--appendonly", "yes"} <= set(args) and "--dir" in args
    assert args[args.index("--dir") + 1] == redis_container()["volumeMounts"][0]["mountPath"]  # it writes to the claim
    password = SECRETS["toolbridge-keys"]["redis-password"]
    with running_redis(tmp_path) as server:
        with redis.Redis(port=server.port, password=password) as client:
            client.set("toolbridge:vault:v1:someone", b"ciphertext")
        for kind in ("readinessProbe", "livenessProbe"):
            command = redis_container()[kind]["exec"]["command"]
            assert server.probe(command, env) == 0, kind
            assert server.probe(command, env | {"REDISCLI_AUTH": "wrong"}) != 0, kind
    claim = find("StatefulSet", "toolbridge-redis")["spec"]["volumeClaimTemplates"][0]
    assert claim["metadata"]["name"] == redis_container()["volumeMounts"][0]["name"]
    with running_redis(tmp_path) as server, redis.Redis(port=server.port, password=password) as client:
        assert client.get("toolbridge:vault:v1:someone") == b"ciphertext"


def test_the_pods_meet_the_restricted_pod_security_standard() -> None:
    """The audit's K8: only runAsNonRoot and runAsUser, so the pods failed the `restricted` profile."""
    for kind, name in (("Deployment", "toolbridge"), ("StatefulSet", "toolbridge-redis")):
        pod = pod_spec(kind, name)
        assert pod["automountServiceAccountToken"] is False, name
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] > 0, name
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, name
            assert context["capabilities"] == {"drop": ["ALL"]}, name
            assert context["readOnlyRootFilesystem"] is True, name
    # Where the gateway's processes may write with a read-only root: emptyDirs, not the image.
    mounts = {mount["mountPath"] for mount in gateway_container()["volumeMounts"]}
    assert {"/tmp", "/home/toolbridge"} <= mounts


def _mebibytes(quantity: str) -> float:
    value, unit = re.fullmatch(r"(\d+)(Mi|Gi)", quantity).groups()  # type: ignore[union-attr]
    return int(value) * (1024 if unit == "Gi" else 1)


def test_every_container_requests_what_it_needs_and_is_bounded() -> None:
    """K8: no resources (BestEffort, the first evicted); an idle gateway is about 140 MiB."""
    for container in (gateway_container(), redis_container()):
        resources = container["resources"]
        assert resources["requests"]["cpu"] and "cpu" not in resources["limits"]  # no throttling of a stream
        assert _mebibytes(resources["limits"]["memory"]) > _mebibytes(resources["requests"]["memory"])
    assert _mebibytes(gateway_container()["resources"]["requests"]["memory"]) >= IDLE_GATEWAY_MIB


def test_the_gateway_runs_this_versions_image() -> None:
    """K8: `toolbridge:latest` (pulled again at every start, and whatever was pushed last)."""
    assert gateway_container()["image"] == f"toolbridge:{__version__}"
    assert f"toolbridge:{__version__}" in (ROOT / "deploy" / "kubernetes" / "toolbridge.yaml").read_text()


def test_the_configmap_runs_only_servers_the_image_carries(tmp_path: Path) -> None:
    """K8: the ConfigMap ran `uvx mcp-server-time`, downloading it from PyPI at every pod start (and failing where
    the cluster cannot reach it) while the image has it."""
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    carried = {entry.name for requirement in dependencies
               for entry in importlib.metadata.distribution(re.split(r"[<>=\[ ;]", requirement)[0]).entry_points
               if entry.group == "console_scripts"}
    servers = json.loads(find("ConfigMap", "toolbridge-mcp")["data"]["mcp.json"])["mcpServers"]
    for name, server in servers.items():
        assert server["command"] not in LAUNCHERS and server["command"] in carried, name
