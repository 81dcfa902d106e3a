"""What can be checked of the deployment files without a Docker engine: they parse and name real settings,
the compose file's timings and ports hold together, and deploy/nginx.conf itself runs in front of gateways
(with a stand-in for Docker's DNS) and gets past a replica that is gone."""

import fnmatch
import re
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import yaml

from app.main import create_app
from app.mcp.config import load_mcp_config
from app.mcp.pool import SHUTDOWN_TIMEOUT
from app.mcp.processes import GROUP_KILL_TIMEOUT
from app.settings import FLAT_NAMES, field_of
from tests.conftest import make_settings, running_gateway
from tests.support.fake_upstream import FakeUpstream, Turn
from tests.support.replica_services import Nginx, StubDns, unanswered
from tests.support.servers import ServerThread, free_port

ROOT = Path(__file__).parent.parent
SETTING_NAMES = {f"TOOLBRIDGE_{name.upper()}" for name in FLAT_NAMES}
GATEWAYS = ("toolbridge", "toolbridge-replica")  # the compose services that run the gateway


def test_compose_wires_open_webui_to_toolbridge_and_toolbridge_to_lm_studio() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    gateway, webui = compose["services"]["toolbridge"], compose["services"]["open-webui"]
    assert set(gateway["environment"]) <= SETTING_NAMES
    assert "host.docker.internal:1234" in gateway["environment"]["TOOLBRIDGE_UPSTREAM_URL"]
    assert "host.docker.internal:host-gateway" in gateway["extra_hosts"]
    mounted = {volume.split(":")[1] for volume in gateway["volumes"]}
    assert gateway["environment"]["TOOLBRIDGE_MCP_CONFIG"] in mounted
    port = gateway["environment"]["TOOLBRIDGE_PORT"]
    assert webui["environment"]["OPENAI_API_BASE_URL"] == f"http://toolbridge:{port}/v1"
    assert webui["depends_on"]["toolbridge"]["condition"] == "service_healthy"
    assert all(p.startswith("127.0.0.1:") for s in (gateway, webui) for p in s["ports"])


def test_the_compose_gateway_answers_open_webui_and_the_health_check_only(tmp_path: Path) -> None:
    gateway_env = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["toolbridge"]["environment"]
    port = gateway_env["TOOLBRIDGE_PORT"]
    with running_gateway(tmp_path, host=gateway_env["TOOLBRIDGE_HOST"],
                         allowed_hosts=gateway_env["TOOLBRIDGE_ALLOWED_HOSTS"]) as gateway:
        def status(host: str) -> int:
            return httpx.get(f"{gateway.url}/health", headers={"Host": host}).status_code

        assert status(f"toolbridge:{port}") == 200  # Open WebUI's OPENAI_API_BASE_URL
        assert status(f"127.0.0.1:{port}") == 200  # the Dockerfile's HEALTHCHECK
        assert status(f"evil.example:{port}") == 403


def test_dockerfile_is_non_root_with_node_uv_and_a_health_check() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^USER (?!root)\w+", dockerfile, re.MULTILINE)
    assert "HEALTHCHECK" in dockerfile and "/health" in dockerfile
    assert "nodejs" in dockerfile and "npm" in dockerfile
    assert "pip install --no-cache-dir uv" in dockerfile
    assert set(re.findall(r"(TOOLBRIDGE_[A-Z_]+)=", dockerfile)) <= SETTING_NAMES


def test_every_setting_is_documented_in_env_example_and_the_configuration_docs() -> None:
    example = (ROOT / "config" / ".env.example").read_text()
    table = (ROOT / "docs" / "configuration.md").read_text()
    for name in SETTING_NAMES:
        assert f"{name}=" in example, name
        assert f"| `{name}` |" in table, name  # a row of the settings table, not a mention in passing
    assert set(re.findall(r"^(TOOLBRIDGE_[A-Z_]+)=", example, re.MULTILINE)) <= SETTING_NAMES


def test_example_configs_load() -> None:
    for path in (ROOT / "mcp.json", ROOT / "config" / "mcp.example.json"):
        config = load_mcp_config(path, {"HOME": "/home/me", "GITHUB_TOKEN": "t"})
        assert config.found and not config.problems, path


def test_the_scale_profile_puts_replicas_on_redis_behind_nginx() -> None:
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    gateway, replica = services["toolbridge"], services["toolbridge-replica"]
    assert "profiles" not in gateway and "sqlite:////" in gateway["environment"]["TOOLBRIDGE_STATE_URL"]
    assert services["redis"]["profiles"] == services["nginx"]["profiles"] == replica["profiles"] == ["scale"]
    assert replica["environment"]["TOOLBRIDGE_STATE_URL"].endswith(":-redis://:${REDIS_PASSWORD:-}@redis:6379/0}")
    assert {k: v for k, v in replica["environment"].items() if k != "TOOLBRIDGE_STATE_URL"} == {
        k: v for k, v in gateway["environment"].items() if k != "TOOLBRIDGE_STATE_URL"}
    assert not any("toolbridge-state" in volume for volume in replica["volumes"])  # no file shared by replicas
    # nginx and Open WebUI reach every gateway by the one name.
    assert replica["networks"]["default"]["aliases"] == ["toolbridge"]
    assert services["nginx"]["depends_on"]["toolbridge"]["condition"] == "service_healthy"
    assert services["nginx"]["ports"] == ["127.0.0.1:8080:80"]
    nginx = (ROOT / "deploy" / "nginx.conf").read_text()
    assert "set $toolbridge toolbridge:8000;" in nginx and "proxy_buffering off;" in nginx
    assert f"proxy_set_header Host {gateway['environment']['TOOLBRIDGE_ALLOWED_HOSTS']};" in nginx


def test_the_single_gateway_is_always_on_8000_and_only_the_scale_profile_has_a_range() -> None:
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    # A range let `down`/`up` move the one gateway to another port of it (the audit saw 8001).
    assert services["toolbridge"]["ports"] == ["127.0.0.1:8000:8000"]
    assert services["toolbridge-replica"]["ports"] == ["127.0.0.1:8001-8009:8000"]
    published = [port.split(":")[1] for service in services.values() for port in service.get("ports", [])]
    assert "8000" not in published[1:] and len(set(published)) == len(published)


def test_dependents_start_once_health_answers_not_30_s_later() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    [check] = re.findall(r"^HEALTHCHECK (.*?) CMD", dockerfile.replace("\\\n", " "), re.MULTILINE | re.DOTALL)
    timing = dict(re.findall(r"--([a-z-]+)=(\d+)s", check))
    assert int(timing["start-period"]) >= 30  # the start interval's bound
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    for name in GATEWAYS:
        # Probed every second from the start until it answers, with the image's command (no `test`: Docker's
        # API inherits it, and the fields not given, from the image).
        check = dict(services[name]["healthcheck"])
        assert _seconds(check.pop("start_interval")) <= 2 and check == {}, name
    assert services["open-webui"]["depends_on"]["toolbridge"]["condition"] == "service_healthy"


def test_an_init_process_reaps_orphaned_mcp_helpers() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"apt-get install [^\n]*\btini\b", dockerfile)
    # tini without -g: SIGTERM reaches the gateway alone, which ends its MCP servers after the grace.
    assert re.search(r'^ENTRYPOINT \["/usr/bin/tini", "--"\]$', dockerfile, re.MULTILINE)
    assert re.search(r'^CMD \["toolbridge"\]$', dockerfile, re.MULTILINE)
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    assert not any(services[name].get("init") for name in GATEWAYS)  # one init, not docker-init in front of tini


def _seconds(duration: str) -> float:
    value, unit = re.fullmatch(r"(\d+)(s|m)", duration).groups()  # type: ignore[union-attr]
    return int(value) * (60 if unit == "m" else 1)


def test_docker_and_kubernetes_wait_out_the_grace_and_the_mcp_servers_stop() -> None:
    """After SIGTERM: TOOLBRIDGE_SHUTDOWN_GRACE for requests, then the pool's shutdown (its timeout, then
    the process groups' kill). A shorter stop timeout cuts requests off (Docker's default is 10 s)."""
    stopping = SHUTDOWN_TIMEOUT + GROUP_KILL_TIMEOUT
    default_grace = field_of("shutdown_grace").default
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    for name in GATEWAYS:
        grace = float(services[name]["environment"].get("TOOLBRIDGE_SHUTDOWN_GRACE", default_grace))
        assert _seconds(services[name]["stop_grace_period"]) >= grace + stopping, name
    documents = [doc for doc in yaml.safe_load_all((ROOT / "deploy" / "kubernetes" / "toolbridge.yaml").read_text())]
    pod = next(doc for doc in documents if doc["kind"] == "Deployment")["spec"]["template"]["spec"]
    env = {item["name"]: item.get("value") for item in pod["containers"][0]["env"]}
    assert pod["terminationGracePeriodSeconds"] >= float(env["TOOLBRIDGE_SHUTDOWN_GRACE"]) + stopping
    readme = (ROOT / "README.md").read_text()
    assert "--stop-timeout" in readme  # what a bare `docker run` / `docker stop` needs


def test_the_image_is_built_from_a_small_context_on_a_pinned_debian() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.\d+-slim-(bookworm|trixie)$", dockerfile, re.MULTILINE)
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]

    def ignored(path: str) -> bool:  # Docker's rules as this file uses them: a pattern, or **/ before it
        parts = path.split("/")
        prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
        return any(fnmatch.fnmatchcase(prefix, pattern) or (pattern.startswith("**/") and fnmatch.fnmatchcase(
            prefix.rsplit("/", 1)[-1], pattern[3:])) for pattern in patterns for prefix in prefixes)

    for path in (".venv/lib/x.py", ".git", "tests/npm/node_modules/a/index.js", "test-artifacts/log",
                 "app/__pycache__/x.pyc", ".pytest_cache/v", ".env", "toolbridge.egg-info/PKG-INFO"):
        assert ignored(path), path
    copied = re.findall(r"^COPY (?!--from=)(.+) \S+$", dockerfile, re.MULTILINE)  # --from: another stage's
    needed = [source for line in copied for source in line.split()]
    assert needed and not any(ignored(source) for source in needed)
    for source in needed:
        assert not any(ignored(str(path.relative_to(ROOT))) for path in (ROOT / source).rglob("*.py")), source


def test_the_kubernetes_manifests_name_real_settings_and_share_redis(tmp_path: Path) -> None:
    documents = [doc for path in sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))
                 for doc in yaml.safe_load_all(path.read_text())]
    by_kind = {(doc["kind"], doc["metadata"]["name"]): doc for doc in documents}
    [container] = by_kind[("Deployment", "toolbridge")]["spec"]["template"]["spec"]["containers"]
    env = {item["name"]: item.get("value") for item in container["env"]}
    # Besides settings, only helpers that settings name as $(NAME) (kubelet puts their values in).
    helpers = set(env) - SETTING_NAMES
    assert helpers and all(any(f"$({name})" in (value or "") for value in env.values()) for name in helpers)
    redis_service = by_kind[("Service", "toolbridge-redis")]["spec"]["ports"][0]["port"]
    assert env["TOOLBRIDGE_STATE_URL"] == f"redis://:$(REDIS_PASSWORD)@toolbridge-redis:{redis_service}/0"
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    grace = by_kind[("Deployment", "toolbridge")]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > float(env["TOOLBRIDGE_SHUTDOWN_GRACE"])
    config = tmp_path / "mcp.json"
    config.write_text(by_kind[("ConfigMap", "toolbridge-mcp")]["data"]["mcp.json"])
    assert set(load_mcp_config(config).servers) == {"time"}


# deploy/nginx.conf as shipped, run by Debian's nginx: the replicas are 127.0.0.2 and 127.0.0.3 on one port,
# as containers are addresses on Docker's network, and "toolbridge" resolves through a stand-in for Docker's DNS.
REPLICA_ADDRESSES = ("127.0.0.2", "127.0.0.3")


def _shipped_nginx_site(dns_port: int, replica_port: int) -> Callable[[int], str]:
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    assert "resolver 127.0.0.11 " in conf and "listen 80;" in conf and "toolbridge:8000" in conf
    return lambda port: (conf.replace("127.0.0.11", f"127.0.0.1:{dns_port}")
                         .replace("listen 80;", f"listen 127.0.0.1:{port};")
                         .replace("toolbridge:8000", f"toolbridge:{replica_port}"))


@contextmanager
def _gateway_at(address: str, port: int, tmp: Path, upstream_url: str) -> Iterator[str]:
    tmp.mkdir()
    settings = make_settings(tmp, None, upstream_url=upstream_url, allowed_hosts="toolbridge")
    with ServerThread(create_app(settings), port, host=address):
        yield f"http://{address}:{port}"


def _chats(gateway_url: str) -> int:
    metrics = httpx.get(f"{gateway_url}/metrics", timeout=30).text
    return sum(int(float(line.rsplit(" ", 1)[1])) for line in metrics.splitlines()
               if line.startswith("toolbridge_requests_total{") and 'route="/v1/chat/completions"' in line)


def test_nginx_leaves_a_scaled_away_replica_after_a_short_connect_timeout_and_asks_dns_again(tmp_path: Path) -> None:
    upstream = FakeUpstream(default=lambda _: Turn(content="ok"), record=False)
    port = free_port()
    dns = StubDns("toolbridge", list(REPLICA_ADDRESSES))
    with ExitStack() as stack:
        stack.callback(dns.close)
        upstream_thread = stack.enter_context(ServerThread(upstream.app))
        upstream_url = f"{upstream_thread.url}/v1"
        kept = stack.enter_context(_gateway_at(REPLICA_ADDRESSES[0], port, tmp_path / "a", upstream_url))
        going = stack.enter_context(ExitStack())  # the replica that is scaled away
        gone = going.enter_context(_gateway_at(REPLICA_ADDRESSES[1], port, tmp_path / "b", upstream_url))
        nginx_dir = tmp_path / "nginx"
        nginx_dir.mkdir()
        nginx = Nginx(nginx_dir, [], site=_shipped_nginx_site(dns.port, port))
        stack.callback(nginx.stop)

        def chat() -> None:  # a POST: tried on another replica only when it never reached the first
            response = httpx.post(f"{nginx.url}/v1/chat/completions", timeout=10,  # hang guard; main: 60 s
                                  json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
            assert response.status_code == 200, response.text
            assert response.json()["choices"][0]["message"]["content"] == "ok"

        def timeouts_to_the_gone_replica() -> int:
            return len(re.findall(rf"upstream timed out .* upstream: \"http://{REPLICA_ADDRESSES[1]}:{port}/",
                                  nginx.error_log.read_text()))

        for _ in range(20):  # nginx takes both addresses from the DNS answer, in turn
            chat()
        assert _chats(kept) > 0 and _chats(gone) > 0
        # Scaled away: the container is gone, its address no longer answers; Docker's DNS still names it for
        # a moment (and nginx's cache longer): each request that tries it moves on after the connect timeout.
        going.close()
        with unanswered(REPLICA_ADDRESSES[1], port):
            deadline = time.monotonic() + 60
            while timeouts_to_the_gone_replica() == 0:
                assert time.monotonic() < deadline, "nginx never tried the replica that is gone"
                chat()
            dns.addresses = [REPLICA_ADDRESSES[0]]
            asked = dns.queries
            deadline = time.monotonic() + 30
            while dns.queries == asked:  # resolver valid=: nginx asks again within seconds
                assert time.monotonic() < deadline, "nginx never asked the DNS again"
                chat()
            tried = timeouts_to_the_gone_replica()
            for _ in range(10):
                chat()
            assert timeouts_to_the_gone_replica() == tried  # out of the rotation


def test_ci_runs_the_readmes_test_command() -> None:
    """.ci/run is the README's test command (pip quiet), so what CI checks (ruff, mypy, the suite) is what a
    contributor runs."""
    def test_command(page: str) -> str:
        text = (ROOT / page).read_text()
        return next(line for line in text.splitlines()
                    if line.startswith("python3 -m venv .venv && ") and '".[dev]"' in line)

    command = test_command("README.md")
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert command.replace("pip install -e", "pip install -q -e") in ci
    assert ".venv/bin/ruff check . && .venv/bin/mypy && .venv/bin/pytest" in command
    assert test_command("docs/development.md") == command  # the contributors' page says the same
