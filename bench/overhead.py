"""What the gateway adds, measured against the upstream itself in the same run.

Starts the scripted model (bench/scripted_model.py) and toolbridge (with the repo's mcp.json and the
real mcp-server-time) as processes on 127.0.0.1, then sends the same requests straight to the model
and through the gateway, interleaved in random order, several rounds. Prints medians of the round
medians (p50) and p90s, the difference and the ratio, and the gateway's memory.

    .venv/bin/python -m bench.overhead [--rounds 7] [--requests 40]
"""

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil

from tests.support.servers import free_port

ROOT = Path(__file__).parent.parent
PLAIN = {"model": "qwen3-8b", "messages": [{"role": "user", "content": "Say something."}]}
TOOL = {"model": "qwen3-8b", "messages": [{"role": "user", "content": "What time is it in UTC?"}]}
START_TIMEOUT = 60.0


def start(args: list[str], url: str, ready: Callable[[httpx.Response], bool]) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        try:
            if ready(httpx.get(url, timeout=2)):
                return process
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    process.kill()
    raise SystemExit(f"{args[0]} did not become ready at {url}")


def timed_json(client: httpx.Client, url: str, body: dict) -> float:
    started = time.perf_counter()
    response = client.post(url, json=body)
    response.raise_for_status()
    return (time.perf_counter() - started) * 1000


def timed_stream(client: httpx.Client, url: str, body: dict) -> tuple[float, float]:
    """Milliseconds to the first content delta, and to the end of the stream."""
    started = time.perf_counter()
    first = None
    with client.stream("POST", url, json={**body, "stream": True}) as response:
        for line in response.iter_lines():
            if first is None and line.startswith("data: {") and '"content":"' in line.replace(" ", "") \
                    and '"content":""' not in line.replace(" ", ""):
                first = (time.perf_counter() - started) * 1000
    return first or 0.0, (time.perf_counter() - started) * 1000


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description="toolbridge overhead against a direct upstream")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=40, help="requests per arm and round")
    args = parser.parse_args()

    model_port, gateway_port = free_port(), free_port()
    model = start([sys.executable, "-m", "bench.scripted_model", "--port", str(model_port)],
                  f"http://127.0.0.1:{model_port}/v1/models", lambda r: r.status_code == 200)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLBRIDGE_")}
    gateway_args = [str(Path(sys.executable).parent / "toolbridge"), "--port", str(gateway_port),
                    "--upstream-url", f"http://127.0.0.1:{model_port}/v1", "--log-level", "warning"]
    started = time.perf_counter()
    gateway = subprocess.Popen(gateway_args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        health = f"http://127.0.0.1:{gateway_port}/health"
        start_until = time.monotonic() + START_TIMEOUT
        first_200 = tools_ready = None
        while time.monotonic() < start_until and tools_ready is None:
            try:
                body = httpx.get(health, timeout=2).json()
                first_200 = first_200 or time.perf_counter() - started
                if body["servers"]["time"]["state"] == "ready":
                    tools_ready = time.perf_counter() - started
            except httpx.TransportError:
                pass
            time.sleep(0.02)
        if tools_ready is None:
            raise SystemExit("the gateway's time server never became ready")
        proc = psutil.Process(gateway.pid)
        idle_rss = proc.memory_info().rss / 2**20
        children_rss = sum(c.memory_info().rss for c in proc.children(recursive=True)) / 2**20

        arms = {
            "direct": f"http://127.0.0.1:{model_port}/v1/chat/completions",
            "gateway": f"http://127.0.0.1:{gateway_port}/v1/chat/completions",
        }
        rounds: dict[str, list[list[float]]] = defaultdict(list)
        with httpx.Client(timeout=30) as client:
            for url in arms.values():  # warm-up
                for _ in range(10):
                    timed_json(client, url, PLAIN)
                    timed_stream(client, url, PLAIN)
            for _ in range(args.rounds):
                cases = [(arm, kind) for arm in arms for kind in ("json", "stream")] + [("gateway", "tool")]
                random.shuffle(cases)
                for arm, kind in cases:
                    url = arms[arm]
                    samples: dict[str, list[float]] = defaultdict(list)
                    for _ in range(args.requests):
                        if kind == "json":
                            samples[f"{arm} json"].append(timed_json(client, url, PLAIN))
                        elif kind == "tool":
                            samples["gateway tool round"].append(timed_json(client, url, TOOL))
                        else:
                            ttft, total = timed_stream(client, url, PLAIN)
                            samples[f"{arm} stream ttft"].append(ttft)
                            samples[f"{arm} stream total"].append(total)
                    for name, values in samples.items():
                        rounds[name].append(values)
        loaded_rss = proc.memory_info().rss / 2**20
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)
        model.terminate()
        model.wait(timeout=30)

    def p50(name: str) -> float:
        return statistics.median(statistics.median(r) for r in rounds[name])

    def p90_of(name: str) -> float:
        return statistics.median(p90(r) for r in rounds[name])

    print(f"machine: {os.cpu_count()} cpus, {platform.python_implementation()} {platform.python_version()}, "
          f"{args.rounds} rounds x {args.requests} requests per arm, interleaved at random")
    print(f"{'measure':<22}{'direct p50':>12}{'gateway p50':>13}{'added':>9}{'ratio':>8}{'gw p90':>9}")
    for measure in ("json", "stream ttft", "stream total"):
        direct, through = p50(f"direct {measure}"), p50(f"gateway {measure}")
        print(f"{measure:<22}{direct:>10.2f}ms{through:>11.2f}ms{through - direct:>7.2f}ms"
              f"{through / direct:>7.2f}x{p90_of(f'gateway {measure}'):>7.2f}ms")
    tool, plain = p50("gateway tool round"), p50("gateway json")
    print(f"{'one tool round':<22}{'':>12}{tool:>11.2f}ms   (+{tool - plain:.2f} ms over a plain request: "
          "one more upstream turn and one mcp-server-time call)")
    print(f"startup: first /health after {first_200:.2f} s, time server's tools ready after {tools_ready:.2f} s")
    print(f"memory: gateway RSS {idle_rss:.0f} MiB idle, {loaded_rss:.0f} MiB after the run; "
          f"MCP server children {children_rss:.0f} MiB")
    print(json.dumps({name: round(p50(name), 3) for name in sorted(rounds)}))


if __name__ == "__main__":
    main()
