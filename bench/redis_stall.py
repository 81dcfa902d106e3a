"""What a Redis that stops answering costs each chat (audit N11): `toolbridge` with its memory in a real
redis-server, which is then frozen (SIGSTOP) while chats go on, and continued (SIGCONT). Prints each
chat's time before, during and after, and how long /health took to say "ok" again.

    .venv/bin/python -m bench.redis_stall [--chats 6]
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.support.replica_services import RedisServer
from tests.support.servers import ServerThread, free_port

TOOLBRIDGE = str(Path(sys.executable).parent / "toolbridge")
BULKY = Path(__file__).parent.parent / "tests" / "support" / "mcp_servers" / "bulky.py"
# One earlier turn, so each chat reads memory (a restore); it calls a tool, so it writes memory too.
HISTORY = [{"role": "user", "content": "Hi."}, {"role": "assistant", "content": "Hello."},
           {"role": "user", "content": "And now?"}]


def timed_chat(base: str) -> float:
    started = time.monotonic()
    httpx.post(f"{base}/v1/chat/completions", json={"model": "m", "messages": HISTORY}, timeout=60).raise_for_status()
    return time.monotonic() - started


def decide(body: dict) -> Turn:
    if body["messages"][-1]["role"] == "tool":
        return Turn(content="Fine.")
    return Turn(calls=[Call("big", {"size": 10, "tag": str(time.monotonic())})])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=6)
    args = parser.parse_args()
    upstream = FakeUpstream(default=decide, record=False)
    redis = RedisServer()
    redis.start()
    with ServerThread(upstream.app) as model, tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {"bulky": {"command": sys.executable, "args": [str(BULKY)]}}}))
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLBRIDGE_")} | {
            "TOOLBRIDGE_UPSTREAM_URL": f"{model.url}/v1", "TOOLBRIDGE_STATE_URL": redis.url,
            "TOOLBRIDGE_LOG_LEVEL": "error"}
        port = free_port()
        gateway = subprocess.Popen([TOOLBRIDGE, "--port", str(port), "--mcp-config", str(config)], env=env, cwd=tmp,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        pid = redis._process.pid  # type: ignore[union-attr]
        try:
            wait_ok(base, 60)
            print("Redis answering:", [f"{timed_chat(base):.2f}" for _ in range(args.chats)], "s")
            os.kill(pid, signal.SIGSTOP)
            try:
                print("Redis stopped:  ", [f"{timed_chat(base):.2f}" for _ in range(args.chats)], "s")
                print("/health:", httpx.get(f"{base}/health", timeout=10).json())
            finally:
                os.kill(pid, signal.SIGCONT)
            print(f"/health ok again after {wait_ok(base, 60):.2f} s")
            print("Redis continued:", [f"{timed_chat(base):.2f}" for _ in range(args.chats)], "s")
        finally:
            gateway.terminate()
            gateway.wait(timeout=60)
            redis.stop()


def wait_ok(base: str, timeout: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            body = httpx.get(f"{base}/health", timeout=5).json()
            if body.get("status") == "ok" and body["servers"]["bulky"]["state"] == "ready":
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise SystemExit("/health never said ok")


if __name__ == "__main__":
    main()
