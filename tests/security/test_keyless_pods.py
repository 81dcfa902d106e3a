"""Audit 2026-11-27, K8 and S11 (docker.md K8, security.md S11): deploy/kubernetes/toolbridge.yaml took
TOOLBRIDGE_API_KEYS from a Secret marked `optional: true`. A cluster without that Secret (never made, misnamed, made
in another namespace) ran the gateway with no keys at all, on 0.0.0.0 behind a Service every pod reaches: every
tool, the restarts, everyone's approvals.

The attacker is any pod of the cluster, calling the gateway without a key. It hopes for a pod started without the
Secret, or without one of the Secret's values. kubelet's part (a Secret that is missing stops the container unless
the reference is optional) is done as kubelet does it (tests/support/deployment.py); the gateway is real.
"""

from pathlib import Path

import httpx
import pytest

from app.main import create_app
from tests.support.deployment import (
    SECRETS,
    MissingSecret,
    container_env,
    gateway_container,
    image_container_env,
    settings_from,
)
from tests.support.fake_upstream import FakeUpstream
from tests.support.servers import ServerThread


def test_no_gateway_pod_runs_without_the_keys_secret_and_the_one_that_runs_wants_a_key(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    with pytest.raises(MissingSecret):
        container_env(gateway_container(), "tools", {})
    for missing in SECRETS["toolbridge-keys"]:
        partial = {"toolbridge-keys": {k: v for k, v in SECRETS["toolbridge-keys"].items() if k != missing}}
        with pytest.raises(MissingSecret):
            container_env(gateway_container(), "tools", partial)
    env = image_container_env(gateway_container(), "tools", SECRETS)
    settings = settings_from(env, state_url="memory://", upstream_url=f"{upstream.url}/v1",
                             mcp_config=str(tmp_path / "none.json"))
    with ServerThread(create_app(settings)) as gateway:
        host = {"Host": "toolbridge:8000"}  # a pod calling the Service: the name the guard serves, and no key
        assert httpx.get(f"{gateway.url}/v1/models", headers=host).status_code == 401
        key = host | {"Authorization": f"Bearer {SECRETS['toolbridge-keys']['api-keys']}"}
        assert httpx.get(f"{gateway.url}/v1/models", headers=key).status_code == 200
