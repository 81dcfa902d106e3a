"""What one API key can make conversation memory cost everyone (audit N7): a key builds a conversation whose
every turn stores megabytes of tool results, then restores it from several requests at once. Prints the
store's size per key, whether another key's turn survived, and during the restores the gateway's peak RSS
and the slowest /health answer (a blocked event loop shows there).

The gateway runs as `toolbridge` (SQLite memory in a temporary directory, two API keys) with
tests/support/mcp_servers/bulky.py; the model is a stand-in that calls `big` CALLS times a round for ROUNDS
rounds when asked "turn N", and answers otherwise.

    .venv/bin/python -m bench.memory_flood [--turns 12] [--calls 50] [--rounds 8] [--restores 8] [--max-mb 100]
"""

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.support.servers import ServerThread, free_port

ATTACKER, VICTIM = "sk-bench-attacker", "sk-bench-victim"
BULKY = Path(__file__).parent.parent / "tests" / "support" / "mcp_servers" / "bulky.py"
TOOLBRIDGE = str(Path(sys.executable).parent / "toolbridge")


def decide(body: dict[str, Any], calls: int, rounds: int, size: int) -> Turn:
    messages = body.get("messages") or []
    asked_at = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=0)
    text = str(messages[asked_at].get("content") or "") if messages else ""
    done = sum(1 for m in messages[asked_at + 1:] if m.get("role") == "assistant")
    tool = next((t["function"]["name"] for t in body.get("tools") or [] if t["function"]["name"].endswith("big")), None)
    if tool and text.startswith("turn") and done < rounds and body.get("tool_choice") != "none":
        return Turn(calls=[Call(tool, {"size": size, "tag": f"{text}/{done}/{n}"}) for n in range(calls)])
    return Turn(content=f"done: {text}")


def chat(base: str, key: str, messages: list[dict[str, Any]]) -> str:
    response = httpx.post(f"{base}/v1/chat/completions", json={"model": "m", "messages": messages},
                          headers={"Authorization": f"Bearer {key}"}, timeout=600)
    response.raise_for_status()
    return response.json()["choices"][0]["message"]["content"]


def store_stats(db: Path) -> str:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        count, total, biggest = con.execute(
            "SELECT count(*), coalesce(sum(length(value)), 0), coalesce(max(length(value)), 0) FROM entries").fetchone()
        try:
            owners = [round(b / 1e6, 2) for (b,) in con.execute(
                "SELECT sum(size) FROM entries GROUP BY owner ORDER BY 1 DESC")]
        except sqlite3.OperationalError:  # before issue 27: entries had no owner
            owners = ["(no owners)"]
    return f"{count} entries, {total / 1e6:.1f} MB (per key: {owners} MB), biggest {biggest / 1e6:.2f} MB"


def restored_tools(upstream: FakeUpstream, base: str, key: str, history: list[dict[str, Any]]) -> int:
    upstream.record = True
    upstream.requests.clear()
    upstream.paths.clear()
    chat(base, key, history)
    upstream.record = False
    return sum(1 for m in upstream.chat_requests()[0]["messages"] if m["role"] == "tool")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--size", type=int, default=30_000, help="characters of each result (cut at 25,000)")
    parser.add_argument("--restores", type=int, default=8, help="concurrent restores")
    parser.add_argument("--max-mb", type=float, default=100.0, help="TOOLBRIDGE_STATE_MAX_MB")
    args = parser.parse_args()

    upstream = FakeUpstream(default=lambda body: decide(body, args.calls, args.rounds, args.size), record=False)
    with ServerThread(upstream.app) as model, tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {"bulky": {"command": sys.executable, "args": [str(BULKY)]}}}))
        db = Path(tmp) / "state.db"
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLBRIDGE_")} | {
            "TOOLBRIDGE_UPSTREAM_URL": f"{model.url}/v1", "TOOLBRIDGE_STATE_URL": f"sqlite:///{db}",
            "TOOLBRIDGE_API_KEYS": f"{ATTACKER},{VICTIM}", "TOOLBRIDGE_TOOL_TRACE": "off",
            "TOOLBRIDGE_MAX_TOOL_ROUNDS": str(args.rounds + 1), "TOOLBRIDGE_STATE_MAX_MB": str(args.max_mb),
            "TOOLBRIDGE_LOG_LEVEL": "warning", "TOOLBRIDGE_TOOL_TIMEOUT": "120"}
        port = free_port()
        gateway = subprocess.Popen([TOOLBRIDGE, "--port", str(port), "--mcp-config", str(config)], env=env,
                                   cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        try:
            run(args, upstream, base, psutil.Process(gateway.pid), db)
        finally:
            gateway.terminate()
            gateway.wait(timeout=60)


def run(args: argparse.Namespace, upstream: FakeUpstream, base: str, process: psutil.Process, db: Path) -> None:
    headers = {"Authorization": f"Bearer {ATTACKER}"}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/health", headers=headers, timeout=5).json()["servers"]["bulky"]["state"] == "ready":
                break
        except (httpx.HTTPError, KeyError):
            pass
        time.sleep(0.1)
    rss = lambda: process.memory_info().rss / 1e6  # noqa: E731
    print(f"gateway RSS at start {rss():.0f} MB")
    victim = [{"role": "user", "content": "turn of the victim"}]
    victim.append({"role": "assistant", "content": chat(base, VICTIM, victim)})
    victim.append({"role": "user", "content": "and?"})
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are a bench."}]
    for number in range(args.turns):
        history.append({"role": "user", "content": f"turn {number}"})
        started = time.monotonic()
        history.append({"role": "assistant", "content": chat(base, ATTACKER, history)})
        print(f"turn {number}: {time.monotonic() - started:.1f} s, RSS {rss():.0f} MB, store {store_stats(db)}",
              flush=True)
    history.append({"role": "user", "content": "now just answer"})

    peak, slowest, stop = [rss()], [0.0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak.append(rss())
            started = time.monotonic()
            httpx.get(f"{base}/health", timeout=120)
            slowest.append(time.monotonic() - started)
            time.sleep(0.05)

    times: list[str] = []

    def restore() -> None:
        started = time.monotonic()
        try:
            chat(base, ATTACKER, history)
            times.append(f"{time.monotonic() - started:.1f}")
        except httpx.HTTPError as exc:
            times.append(f"error {exc}")

    sampler = threading.Thread(target=sample)
    sampler.start()
    workers = [threading.Thread(target=restore) for _ in range(args.restores)]
    started = time.monotonic()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    stop.set()
    sampler.join()
    print(f"{args.restores} concurrent restores of {args.turns} turns: {times} s, wall {time.monotonic() - started:.1f}"
          f" s; RSS peak {max(peak):.0f} MB, after {rss():.0f} MB; slowest /health {max(slowest) * 1000:.0f} ms")
    print(f"restored tool results: the flooder's {restored_tools(upstream, base, ATTACKER, history)}, "
          f"the victim's {restored_tools(upstream, base, VICTIM, victim)} (of {args.rounds * args.calls} each)")


if __name__ == "__main__":
    main()
