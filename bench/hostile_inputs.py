"""Inputs built to make the gateway work hard (audit N3, N4, N8, N13): how long each request takes, and the
slowest /health answer while it runs (a blocked event loop shows there; the goal is under 100 ms).

The gateway runs as `toolbridge` with five copies of tests/support/mcp_servers/basic.py (60 tools, a budget of
4: every request is ranked) and SQLite memory; the model is a stand-in that answers "fine". `--source DIR` runs
the gateway from another checkout (`python -m app` with DIR on PYTHONPATH), for before/after figures.

    .venv/bin/python -m bench.hostile_inputs [--source DIR]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.support.fake_upstream import FakeUpstream, Turn
from tests.support.servers import ServerThread, free_port

BASIC = Path(__file__).parent.parent / "tests" / "support" / "mcp_servers" / "basic.py"
MB = 1_000_000
OPEN_TRACE = '<details type="tool_calls">'


def chat(*messages: dict[str, str]) -> bytes:
    return json.dumps({"model": "m", "messages": list(messages)}).encode()


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def unclosed_trace(size: int) -> bytes:
    return chat(user("hi"), {"role": "assistant", "content": OPEN_TRACE * (size // len(OPEN_TRACE))}, user("and?"))


INPUTS: dict[str, Callable[[], bytes]] = {
    "trace: unclosed openings, 232 KB": lambda: unclosed_trace(232_000),
    "trace: unclosed openings, 1 MB": lambda: unclosed_trace(MB),
    "trace: attribute without '=', 1 MB": lambda: chat(user("hi"), {"role": "assistant", "content":
        f'{OPEN_TRACE[:-1]} id="c1" {"w" * MB}>\n</details>'}, user("and?")),
    "slash: one word, 1 MB": lambda: chat(user("/one " + "y" * MB)),
    "slash: unclosed quote, 1 MB": lambda: chat(user('/one "' + "q" * MB)),
    "user message, 10 MB": lambda: chat(user("use get_weather " + "lorem ipsum " * (10 * MB // 12))),
    "user message, 40 MB": lambda: chat(user("use get_weather " + "lorem ipsum " * (40 * MB // 12))),
    "integer of 5,000 digits": lambda: b'{"model":"m","messages":[{"role":"user","content":"hi"}],"seed":'
                                       + b"9" * 5000 + b"}",
    "user message, 40 MB, and a 70-bit seed": lambda: json.dumps({"model": "m", "seed": 2**70, "messages": [
        user("lorem ipsum " * (40 * MB // 12))]}).encode(),
    "user message, 40 MB, and a lone surrogate": lambda: chat(user("lorem ipsum " * (40 * MB // 12) + "\ud800")),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=None, help="a checkout to run the gateway from")
    args = parser.parse_args()
    with hostile_gateway(args.source) as base:
        print(f"{'input':<44} {'status':>6} {'request s':>10} {'slowest /health ms':>19}")
        for name, build in INPUTS.items():
            status, seconds, slowest = measure(base, build())
            print(f"{name:<44} {status:>6} {seconds:>10.2f} {slowest * 1000:>19.0f}", flush=True)


@contextmanager
def hostile_gateway(source: Path | None) -> Iterator[str]:
    """A gateway (from `source` when given) with five MCP servers ready, a model that answers "fine" and a tool
    budget of 4, as the hostile inputs meet it; yields its base URL and stops it after."""
    upstream = FakeUpstream(default=lambda body: Turn(content="fine"), record=False)
    with ServerThread(upstream.app) as model, tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "mcp.json"
        servers = {f"s{n}": {"command": sys.executable, "args": [str(BASIC)]} for n in range(5)}
        config.write_text(json.dumps({"mcpServers": servers}))
        gateway, base = start_gateway(config, source, {
            "TOOLBRIDGE_UPSTREAM_URL": f"{model.url}/v1", "TOOLBRIDGE_STATE_URL": f"sqlite:///{tmp}/state.db",
            "TOOLBRIDGE_TOOL_BUDGET": "4", "TOOLBRIDGE_LOG_LEVEL": "warning"})
        try:
            wait_ready(base, len(servers))
            yield base
        finally:
            gateway.terminate()
            gateway.wait(timeout=60)


def start_gateway(config: Path, source: Path | None, settings: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """`toolbridge` with these settings and no others from the environment; from `source` when given (`python
    -m app` with it on PYTHONPATH), for before/after figures. Returns the process and its base URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLBRIDGE_")} | settings
    command = [str(Path(sys.executable).parent / "toolbridge")]
    if source is not None:
        env["PYTHONPATH"] = str(source)
        command = [sys.executable, "-m", "app"]
    port = free_port()
    gateway = subprocess.Popen([*command, "--port", str(port), "--mcp-config", str(config)], env=env,
                               cwd=source or config.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return gateway, f"http://127.0.0.1:{port}"


def wait_ready(base: str, servers: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            states = httpx.get(f"{base}/health", timeout=5).json()["servers"].values()
            if sum(s["state"] == "ready" for s in states) == servers:
                return
        except (httpx.HTTPError, KeyError):
            pass
        time.sleep(0.1)
    raise SystemExit("the gateway's servers did not get ready")


def measure(base: str, body: bytes) -> tuple[str, float, float]:
    """The request's status and seconds, and the slowest /health answer while it ran."""

    def post() -> str:
        return str(httpx.post(f"{base}/v1/chat/completions", content=body, timeout=600,
                              headers={"Content-Type": "application/json"}).status_code)

    return while_probing_health(base, post)


def while_probing_health(base: str, run: Callable[[], str]) -> tuple[str, float, float]:
    """What `run` returns and its seconds, and the slowest /health answer while it ran, probed every 10 ms by a
    process of its own (bench/health_probe.py): this one's GIL is the stand-in model's too."""
    prober = subprocess.Popen([sys.executable, "-m", "bench.health_probe", base], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parent.parent)
    assert prober.stdin is not None and prober.stdout is not None
    if prober.stdout.readline().strip() != "ready":
        raise SystemExit("the /health prober did not start")
    started = time.monotonic()
    try:
        outcome = run()
    except httpx.HTTPError as exc:
        outcome = type(exc).__name__
    seconds = time.monotonic() - started
    slowest, _ = prober.communicate(timeout=600)
    return outcome, seconds, float(slowest)

if __name__ == "__main__":
    main()
