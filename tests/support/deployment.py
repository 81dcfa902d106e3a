"""The deployment files as an engine uses them, for tests that run what they describe without an engine.

- Compose: docker-compose.yml with its anchors merged and its variables interpolated from an `.env` as Compose v2
  does (`${VAR}`, `${VAR:-default}` nested, `${VAR:?error}`, `$$`), and a container's environment (the image's
  ENV under the service's).
- Kubernetes: a container's environment as kubelet makes it (values, Secrets, the pod's namespace, `$(NAME)`
  expanded from the entries before it; a Secret that is missing stops the container unless `optional`), its HTTP
  probe as kubelet sends it, and which NetworkPolicies let a connection in.
- Redis run from a command line of these files, on loopback, with its data in a directory of the test's.
"""

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import redis
import yaml
from redis.backoff import NoBackoff
from redis.retry import Retry

from app.settings import Settings
from tests.support.replica_services import require_redis
from tests.support.servers import free_port

ROOT = Path(__file__).parent.parent.parent
KUBERNETES = ROOT / "deploy" / "kubernetes"
KUBELET_VERSION = "1.34"  # kubelet's User-Agent: kube-probe/<major>.<minor>
START_TIMEOUT = 30.0
GATEWAY_START_TIMEOUT = 60.0
ONCE = Retry(NoBackoff(), 0)  # redis-py asks again, with backoff, after a refused password: 4 s a refusal
TOOLBRIDGE = Path(sys.executable).parent / "toolbridge"


# The Secret toolbridge.yaml's header makes, with values of the tests' (the forms its commands make).
SECRETS = {"toolbridge-keys": {"api-keys": "sk-k8s-test", "token-key": "a2V5LWtleS1rZXkta2V5LWtleS1rZXkta2V5LWtleS0=",
                               "redis-password": "5eb1" * 16}}


class InterpolationError(Exception):
    """A `${VAR:?message}` Compose refuses to run without."""


class MissingSecret(Exception):
    """kubelet does not start the container: CreateContainerConfigError."""


_COMPOSE_VARIABLE = re.compile(r"\$(?:\$|\{(?P<braced>[^{}]*(?:\{[^{}]*\}[^{}]*)*)\}|(?P<bare>[A-Za-z_]\w*))")


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """Compose's interpolation of one value."""
    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        if match.group("bare"):
            return env.get(match.group("bare"), "")
        name, operator, rest = re.fullmatch(r"(\w+)(:?[-?+]?)(.*)", match.group("braced"), re.DOTALL).groups()  # type: ignore[union-attr]
        value = env.get(name)
        empty = value is None or (operator.startswith(":") and value == "")
        if operator.endswith("-"):
            return interpolate(rest, env) if empty else str(value)
        if operator.endswith("?"):
            if empty:
                raise InterpolationError(f"{name}: {interpolate(rest, env)}")
            return str(value)
        if operator.endswith("+"):
            return "" if empty else interpolate(rest, env)
        return value or ""

    return _COMPOSE_VARIABLE.sub(substitute, text)


def _interpolated(node: Any, env: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [_interpolated(item, env) for item in node]
    if isinstance(node, dict):
        return {key: _interpolated(value, env) for key, value in node.items()}
    return node


def compose_services(dotenv: Mapping[str, str]) -> dict[str, Any]:
    """docker-compose.yml's services as Compose runs them with this `.env` (anchors and `<<` merged by YAML)."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return _interpolated(compose["services"], dotenv)  # type: ignore[no-any-return]


def image_env() -> dict[str, str]:
    """The Dockerfile's final ENV: what every container of the image starts with."""
    dockerfile = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    env: dict[str, str] = {}
    for line in re.findall(r"^ENV (.+)$", dockerfile, re.MULTILINE):
        for pair in shlex.split(line):
            name, _, value = pair.partition("=")
            env[name] = value.replace("$PATH", env.get("PATH", "/usr/local/bin:/usr/bin:/bin"))
    return env


def compose_container_env(service: Mapping[str, Any]) -> dict[str, str]:
    return image_env() | {name: str(value) for name, value in service["environment"].items()}


def kubernetes_documents() -> list[dict[str, Any]]:
    return [doc for path in sorted(KUBERNETES.glob("*.yaml")) for doc in yaml.safe_load_all(path.read_text()) if doc]


def find(kind: str, name: str) -> dict[str, Any]:
    return next(doc for doc in kubernetes_documents() if doc["kind"] == kind and doc["metadata"]["name"] == name)


def pod_spec(kind: str, name: str) -> dict[str, Any]:
    return find(kind, name)["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def workload(name: str) -> dict[str, Any]:
    """The Deployment or StatefulSet of that name."""
    return next(doc for doc in kubernetes_documents()
                if doc["kind"] in ("Deployment", "StatefulSet") and doc["metadata"]["name"] == name)


def gateway_container() -> dict[str, Any]:
    [container] = workload("toolbridge")["spec"]["template"]["spec"]["containers"]
    return container  # type: ignore[no-any-return]


def redis_container() -> dict[str, Any]:
    [container] = workload("toolbridge-redis")["spec"]["template"]["spec"]["containers"]
    return container  # type: ignore[no-any-return]


def settings_from(env: Mapping[str, str], **overrides: Any) -> Settings:
    """The gateway's settings from a container's environment (its TOOLBRIDGE_* variables), and the test's."""
    fields = {name.removeprefix("TOOLBRIDGE_").lower(): value for name, value in env.items()
              if name.startswith("TOOLBRIDGE_")}
    return Settings.load(_env_file=None, **(fields | overrides))


def kubelet_expand(text: str, env: Mapping[str, str]) -> str:
    """`$(NAME)` replaced by an earlier variable's value; `$$(NAME)` is the literal `$(NAME)`; an unknown name
    stays as written (kubelet's rules for env values, command and args)."""
    def substitute(match: re.Match[str]) -> str:
        if match.group(0).startswith("$$"):
            return match.group(0)[1:]
        return env.get(match.group(1), match.group(0))

    return re.sub(r"\$\$\([A-Za-z_][\w.-]*\)|\$\(([A-Za-z_][\w.-]*)\)", substitute, text)


def container_env(container: Mapping[str, Any], namespace: str,
                  secrets: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """The environment kubelet gives `container` in `namespace`, with these Secrets in the cluster."""
    env: dict[str, str] = {}
    for item in container.get("env", []):
        source = item.get("valueFrom")
        if source is None:
            env[item["name"]] = kubelet_expand(item.get("value", ""), env)
        elif "fieldRef" in source:
            assert source["fieldRef"]["fieldPath"] == "metadata.namespace", source
            env[item["name"]] = namespace
        else:
            ref = source["secretKeyRef"]
            value = secrets.get(ref["name"], {}).get(ref["key"])
            if value is None:
                if ref.get("optional"):
                    continue
                raise MissingSecret(f"secret {ref['name']!r} (key {ref['key']!r}) not found")
            env[item["name"]] = value
    return env


def image_container_env(container: Mapping[str, Any], namespace: str,
                        secrets: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """The toolbridge container's whole environment: the image's ENV under the pod's."""
    return image_env() | container_env(container, namespace, secrets)


@dataclass(frozen=True)
class ProbeRequest:
    path: str
    headers: dict[str, str]


def probe_request(probe: Mapping[str, Any], pod_ip: str, port: int) -> ProbeRequest:
    """kubelet's request for an httpGet probe (pkg/probe/http/request.go): the URL's host is the pod's IP, and
    the Host header is the probe's `Host` httpHeader when it has one, else that URL's host and port."""
    action = probe["httpGet"]
    headers = {header["name"].title(): header["value"] for header in action.get("httpHeaders", [])}
    headers.setdefault("User-Agent", f"kube-probe/{KUBELET_VERSION}")
    headers.setdefault("Accept", "*/*")
    headers["Host"] = headers.get("Host") or f"{pod_ip}:{port}"
    return ProbeRequest(action["path"], headers)


def probe_passes(status: int) -> bool:
    return 200 <= status < 400


@dataclass(frozen=True)
class Peer:
    """One end of a connection in the cluster: a pod's labels and its namespace's."""

    labels: Mapping[str, str]
    namespace: Mapping[str, str]


def _selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    assert selector is None or set(selector) <= {"matchLabels"}, selector  # what these manifests use
    return selector is None or all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def _peer_matches(rule: Mapping[str, Any], source: Peer, same_namespace: bool) -> bool:
    if "ipBlock" in rule:
        return False
    if "namespaceSelector" in rule:
        in_namespace = _selects(rule["namespaceSelector"], source.namespace)
        return in_namespace and _selects(rule.get("podSelector"), source.labels)
    return same_namespace and _selects(rule["podSelector"], source.labels)


def ingress_allowed(target: Peer, source: Peer, port: int) -> bool:
    """Whether the manifests' NetworkPolicies (in the target's namespace) let `source` connect to `port` of
    `target`. A pod no policy selects accepts everything."""
    policies = [doc for doc in kubernetes_documents() if doc["kind"] == "NetworkPolicy"
                and "Ingress" in doc["spec"].get("policyTypes", ["Ingress"])
                and _selects(doc["spec"]["podSelector"], target.labels)]
    if not policies:
        return True
    same_namespace = source.namespace == target.namespace
    return any(
        (not rule.get("from") or any(_peer_matches(peer, source, same_namespace) for peer in rule["from"]))
        and (not rule.get("ports") or any(p["port"] == port for p in rule["ports"]))
        for policy in policies for rule in policy["spec"].get("ingress", [])
    )


# The official image's entrypoint as far as these files use it: options alone are redis-server's.
_ENTRYPOINT = '#!/bin/sh\ncase "$1" in -*) set -- redis-server "$@";; esac\nexec "$@"\n'


class ShippedRedis:
    """Redis run from a command line a deployment file gives (compose's `command`, a container's `args` after
    the image's entrypoint), as the image would run it, but on a free loopback port with its data in `data`:
    the file's `--dir` stands for that volume. `probe` runs a command of the file (a probe) against it."""

    def __init__(self, argv: list[str], data: Path, env: Mapping[str, str] | None = None) -> None:
        binary = require_redis()
        self.port = free_port()
        self.argv, self.data = argv, data
        self.bin = data.parent / f"{data.name}-bin"
        self.bin.mkdir(parents=True, exist_ok=True)
        wrappers = {
            "docker-entrypoint.sh": _ENTRYPOINT,
            # The volume (--dir's value, or the working directory) is the test's directory; the port and the
            # address are the test's too (later arguments win in Redis's command line; --dir is used as it is read).
            "redis-server": (f'#!/bin/sh\nfor arg do\n  shift\n  if [ "$last" = --dir ]; then set -- "$@" {data}; '
                             f'else set -- "$@" "$arg"; fi\n  last=$arg\ndone\n'
                             f'exec {binary} "$@" --port {self.port} --bind 127.0.0.1\n'),
            "redis-cli": f'#!/bin/sh\nexec {Path(binary).with_name("redis-cli")} -p {self.port} "$@"\n',
        }
        for name, script in wrappers.items():
            (self.bin / name).write_text(script)
            (self.bin / name).chmod(0o755)
        self.env = dict(env or {}) | {"PATH": f"{self.bin}:/usr/bin:/bin"}
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.data.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(self.argv, env=self.env, cwd=self.data, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE)
        deadline = time.monotonic() + START_TIMEOUT
        while not self.answers():
            if self.process.poll() is not None:
                raise RuntimeError(f"redis did not start: {self.process.stderr.read().decode()}")  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.02)

    def answers(self) -> bool:
        try:
            with redis.Redis(port=self.port, socket_timeout=1, retry=ONCE) as client:
                client.ping()
        except redis.AuthenticationError:
            return True  # it answers, and asks for the password
        except redis.ConnectionError:
            return False
        return True

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=START_TIMEOUT)
            self.process = None

    def probe(self, command: list[str], env: Mapping[str, str]) -> int:
        """The exit status of an exec probe's command in the container (its env), against this server."""
        return subprocess.run(command, env=dict(env) | {"PATH": self.env["PATH"]}, capture_output=True,
                              timeout=START_TIMEOUT, check=False).returncode

    def url(self, state_url: str) -> str:
        """A gateway's state URL, with the host and port it names made this server's."""
        return re.sub(r"^(\w+://(?:[^@/]*@)?)[^/:@]+:\d+/", rf"\g<1>127.0.0.1:{self.port}/", state_url)


def assert_gateway_starts(tmp_path: Path, env: Mapping[str, str]) -> None:
    """`toolbridge` with a container's environment (on loopback, with this machine's PATH and a home of the
    test's) and an OAuth server in mcp.json answers /health. A gateway that exits instead fails the test at once,
    with its exit status and last log lines."""
    port = free_port()
    config = tmp_path / "oauth-mcp.json"
    config.write_text(json.dumps({"mcpServers": {"time": {"command": "mcp-server-time"},
                                                 "remote": {"url": "http://127.0.0.1:9/mcp", "oauth": True}}}))
    machine = {name: value for name, value in os.environ.items() if not name.startswith("TOOLBRIDGE_")}
    process_env = machine | dict(env) | {
        "TOOLBRIDGE_HOST": "127.0.0.1", "TOOLBRIDGE_PORT": str(port), "TOOLBRIDGE_MCP_CONFIG": str(config),
        "PATH": machine["PATH"], "HOME": str(tmp_path)}
    log = tmp_path / "gateway.log"
    with log.open("w") as out:
        gateway = subprocess.Popen([TOOLBRIDGE], env=process_env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=out)
    try:
        deadline = time.monotonic() + GATEWAY_START_TIMEOUT
        while not _answers(f"http://127.0.0.1:{port}/health"):
            assert gateway.poll() is None, f"exit {gateway.returncode}: {log.read_text()[-1500:]}"
            assert time.monotonic() < deadline, log.read_text()[-1500:]
            time.sleep(0.05)
    finally:
        gateway.terminate()
        gateway.wait(timeout=START_TIMEOUT)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def manifest_redis(data: Path, namespace: str = "tools") -> ShippedRedis:
    """redis.yaml's Redis, not started: the image's entrypoint with the container's args as kubelet expands them
    from its env (the Secret's password)."""
    container = redis_container()
    env = container_env(container, namespace, SECRETS)
    return ShippedRedis(["docker-entrypoint.sh", *(kubelet_expand(arg, env) for arg in container.get("args", []))],
                        data, env)
