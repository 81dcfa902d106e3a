"""What can be checked of the deployment files without a Docker engine: they parse and name real settings."""

import re
from pathlib import Path

import httpx
import yaml

from app.mcp.config import load_mcp_config
from app.settings import Settings
from tests.conftest import running_gateway

ROOT = Path(__file__).parent.parent
SETTING_NAMES = {f"TOOLBRIDGE_{name.upper()}" for name in Settings.model_fields}


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


def test_every_setting_is_documented_in_env_example_and_readme() -> None:
    example = (ROOT / "config" / ".env.example").read_text()
    readme = (ROOT / "README.md").read_text()
    for name in SETTING_NAMES:
        assert f"{name}=" in example, name
        assert f"`{name}`" in readme, name
    assert set(re.findall(r"^(TOOLBRIDGE_[A-Z_]+)=", example, re.MULTILINE)) <= SETTING_NAMES


def test_example_configs_load() -> None:
    for path in (ROOT / "mcp.json", ROOT / "config" / "mcp.example.json"):
        config = load_mcp_config(path, {"HOME": "/home/me", "GITHUB_TOKEN": "t"})
        assert config.found and not config.problems, path


def test_the_scale_profile_puts_replicas_on_redis_behind_nginx() -> None:
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    gateway = services["toolbridge"]
    assert "profiles" not in gateway and gateway["ports"] == ["127.0.0.1:8000-8009:8000"]  # scalable
    assert "sqlite:////" in gateway["environment"]["TOOLBRIDGE_STATE_URL"]  # one replica keeps its file
    assert services["redis"]["profiles"] == services["nginx"]["profiles"] == ["scale"]
    assert services["nginx"]["ports"] == ["127.0.0.1:8080:80"]
    nginx = (ROOT / "deploy" / "nginx.conf").read_text()
    assert "server toolbridge:8000;" in nginx and "proxy_buffering off;" in nginx
    assert f"proxy_set_header Host {gateway['environment']['TOOLBRIDGE_ALLOWED_HOSTS']};" in nginx


def test_the_kubernetes_manifests_name_real_settings_and_share_redis(tmp_path: Path) -> None:
    documents = [doc for path in sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))
                 for doc in yaml.safe_load_all(path.read_text())]
    by_kind = {(doc["kind"], doc["metadata"]["name"]): doc for doc in documents}
    [container] = by_kind[("Deployment", "toolbridge")]["spec"]["template"]["spec"]["containers"]
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert set(env) <= SETTING_NAMES
    redis_service = by_kind[("Service", "toolbridge-redis")]["spec"]["ports"][0]["port"]
    assert env["TOOLBRIDGE_STATE_URL"] == f"redis://toolbridge-redis:{redis_service}/0"
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    grace = by_kind[("Deployment", "toolbridge")]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > float(env["TOOLBRIDGE_SHUTDOWN_GRACE"])
    config = tmp_path / "mcp.json"
    config.write_text(by_kind[("ConfigMap", "toolbridge-mcp")]["data"]["mcp.json"])
    assert set(load_mcp_config(config).servers) == {"time"}
