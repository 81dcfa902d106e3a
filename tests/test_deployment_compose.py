"""docker-compose.yml and the Dockerfile as Compose and an engine use them (issue 44): the environment each gateway
of the scale profile gets from the `.env` the docs make, Redis run from compose's command line (its password, its
append-only file), a Dockerfile that older builders read, and an image that keeps only what runs. No engine
here: Compose's interpolation is done as Compose v2 does it (tests/support/deployment.py); Redis and the gateway
are real."""

import re
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis
import yaml

from app.state.token_key import key_from_setting
from tests.support.deployment import (
    ROOT,
    ShippedRedis,
    assert_gateway_starts,
    compose_container_env,
    compose_services,
)

GATEWAYS = ("toolbridge", "toolbridge-replica")
PASSWORD = "c0ffee" * 10
TOKEN_KEY = "a2V5LWtleS1rZXkta2V5LWtleS1rZXkta2V5LWtleS0="
DOTENV = {"REDIS_PASSWORD": PASSWORD, "TOOLBRIDGE_TOKEN_KEY": TOKEN_KEY,
          "TOOLBRIDGE_STATE_URL": f"redis://:{PASSWORD}@redis:6379/0"}
# What Docker 20.10's builders (legacy and BuildKit's frontend of then) and buildah 1.28 (podman 4.3) read.
OLD_BUILDER_FLAGS = {"FROM": set(), "RUN": set(), "COPY": {"from", "chown"}, "HEALTHCHECK": {
    "interval", "timeout", "start-period", "retries"}}


def _documented_env(tmp_path: Path) -> dict[str, str]:
    """The `.env` docs/operations.md's commands write, made by running them."""
    operations = (ROOT / "docs" / "operations.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", operations, re.DOTALL)
    [commands] = [block for block in blocks if "REDIS_PASSWORD=" in block]
    subprocess.run(["sh", "-c", commands], cwd=tmp_path, check=True, timeout=30)
    return dict(line.split("=", 1) for line in (tmp_path / ".env").read_text().splitlines() if "=" in line)


def test_every_gateway_of_the_scale_profile_gets_the_token_key_and_the_redis_password(tmp_path: Path) -> None:
    """The audit's K2: the compose anchor had no TOOLBRIDGE_TOKEN_KEY, so exporting it or putting it in .env changed
    nothing, and a gateway on Redis with an OAuth server exited 3 in a restart loop. K3: nor a password."""
    for source in ("a fixed .env", "the docs' commands"):
        dotenv = DOTENV if source == "a fixed .env" else _documented_env(tmp_path)
        key_from_setting(dotenv["TOOLBRIDGE_TOKEN_KEY"])  # the form token_key.py accepts
        services = compose_services(dotenv)
        for name in GATEWAYS:
            env = compose_container_env(services[name])
            assert env.get("TOOLBRIDGE_TOKEN_KEY") == dotenv["TOOLBRIDGE_TOKEN_KEY"], name
            url = urlsplit(env["TOOLBRIDGE_STATE_URL"])
            assert (url.scheme, url.hostname, url.password) == ("redis", "redis", dotenv["REDIS_PASSWORD"]), name
        assert services["redis"]["environment"]["REDIS_PASSWORD"] == dotenv["REDIS_PASSWORD"]
    # The replicas' own default, when .env names the password and not the URL.
    replica = compose_services({"REDIS_PASSWORD": PASSWORD})["toolbridge-replica"]
    assert urlsplit(compose_container_env(replica)["TOOLBRIDGE_STATE_URL"]).password == PASSWORD


def _compose_redis(tmp_path: Path, dotenv: dict[str, str]) -> ShippedRedis:
    service = compose_services(dotenv)["redis"]
    return ShippedRedis(service["command"], tmp_path / "redis-data", service.get("environment", {}))


def test_a_replica_with_an_oauth_server_starts_on_compose_redis(tmp_path: Path) -> None:
    """K2's effect, run: a replica's environment, compose's Redis, and an OAuth server in mcp.json: it starts."""
    server = _compose_redis(tmp_path, DOTENV)
    server.start()
    try:
        env = compose_container_env(compose_services(DOTENV)["toolbridge-replica"])
        assert_gateway_starts(tmp_path, env | {"TOOLBRIDGE_STATE_URL": server.url(env["TOOLBRIDGE_STATE_URL"])})
    finally:
        server.stop()


def test_compose_redis_keeps_what_it_holds_across_a_restart(tmp_path: Path) -> None:
    """The audit's K3: `--save "" --appendonly no` and no volume: `docker compose restart redis`, or down and up,
    signed everyone out and dropped the approvals waiting for a yes."""
    services = compose_services({"REDIS_PASSWORD": PASSWORD, "TOOLBRIDGE_TOKEN_KEY": TOKEN_KEY})
    server = _compose_redis(tmp_path, DOTENV)
    url = server.url(compose_container_env(services["toolbridge-replica"])["TOOLBRIDGE_STATE_URL"])
    server.start()
    try:
        with redis.Redis.from_url(url) as client:
            client.set("toolbridge:vault:v1:someone", b"ciphertext")
    finally:
        server.stop()
    server.start()
    try:
        with redis.Redis.from_url(url) as client:
            assert client.get("toolbridge:vault:v1:someone") == b"ciphertext"
    finally:
        server.stop()
    # Its directory is the named volume, which down and up keep.
    [volume] = services["redis"]["volumes"]
    name, mount = volume.split(":")
    assert name in yaml.safe_load((ROOT / "docker-compose.yml").read_text())["volumes"]
    assert f"--dir {mount}" in services["redis"]["command"][-1]


def test_compose_redis_without_a_password_says_so_and_does_not_start(tmp_path: Path) -> None:
    """An empty REDIS_PASSWORD would be `--requirepass ""`: no password at all. Redis refuses to start instead."""
    service = compose_services({})["redis"]
    server = ShippedRedis(service["command"], tmp_path / "data", service.get("environment", {}))
    with pytest.raises(RuntimeError, match=r"set REDIS_PASSWORD in \.env"):
        server.start()


def _instructions(dockerfile: str) -> list[tuple[str, str]]:
    joined = re.sub(r"\\\n\s*", " ", dockerfile)
    return [(match[0].upper(), match[1]) for match in re.findall(r"^(\w+)\s+(.*)$", joined, re.MULTILINE)]


def test_the_dockerfile_builds_with_docker_20_10_and_podman_4() -> None:
    """The audit's K4: `HEALTHCHECK --start-interval` broke the build on Docker 20.10 and on Debian 12's podman 4.3
    (buildah 1.28: `flag provided but not defined: -start-interval`)."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert not re.search(r"^# *(syntax|escape|check)=", dockerfile, re.MULTILINE | re.IGNORECASE)
    assert "<<" not in dockerfile  # heredocs: Dockerfile 1.4
    for instruction, rest in _instructions(dockerfile):
        flags = set(re.findall(r"(?:^|\s)--([a-z-]+)(?:=|\s)", rest.split(" CMD ")[0])) if instruction in (
            "FROM", "RUN", "COPY", "HEALTHCHECK") else set()
        if instruction == "RUN":
            flags = set(re.findall(r"^--([a-z-]+)", rest))  # RUN's own flags come first; the rest is the command's
        assert flags <= OLD_BUILDER_FLAGS.get(instruction, set()), (instruction, flags)


def test_the_readme_says_which_engine_compose_needs() -> None:
    """Compose's start_interval (the second-by-second probe until healthy) needs Docker Engine 25 and Compose 2.20:
    the README says so where it says `docker compose up`, and operations.md what to drop for an older engine."""
    readme = (ROOT / "README.md").read_text()
    docker = readme[readme.index("## Docker"):]
    docker = docker[:docker.index("\n## ", 1)]
    assert "docker compose up" in docker and "Docker Engine 25" in docker and "Compose 2.20" in docker
    assert "start_interval" in (ROOT / "docs" / "operations.md").read_text()


def test_the_image_keeps_only_what_runs() -> None:
    """The image kept its build folder and a copy of the source after `pip install .`: now a stage installs the
    gateway into a virtualenv, and the image takes that virtualenv alone."""
    stages = re.split(r"^FROM ", (ROOT / "Dockerfile").read_text(), flags=re.MULTILINE)[1:]
    build, final = stages[0], stages[-1]
    assert re.match(r"\S+ AS (\w+)", build)
    venv = re.search(r"python -m venv (\S+)", build).group(1)  # type: ignore[union-attr]
    assert f"{venv}/bin/pip install --no-cache-dir /src" in build  # into the virtualenv, by its own pip
    assert f"{venv}/bin/pip uninstall --yes pip setuptools" in build  # which then leaves
    copies = [rest for instruction, rest in _instructions(final) if instruction in ("COPY", "ADD")]
    assert copies == [f"--from=build {venv} {venv}", "mcp.json /config/mcp.json"]
    assert "pip install ." not in final and "WORKDIR /opt" not in final
    assert re.search(rf"^ENV PATH={venv}/bin:\$PATH", final, re.MULTILINE)
