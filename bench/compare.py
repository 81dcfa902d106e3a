"""toolbridge beside the upstream itself, two feature-less relays and (when installed) its peers, in one run.

Starts on 127.0.0.1: the raw-ASGI upstream (bench/upstream.py), the `naive` FastAPI+httpx relay, the
`floor` raw-ASGI+aiohttp relay, the floor's relay as a FastAPI route (`fastapi`: what the framework alone
costs) and `least`, the least an MCP gateway can do as a FastAPI app on the mcp SDK (bench/relays.py),
toolbridge with no MCP server and with one (mcp-server-time), and the peers whose virtualenvs are given. The
relays run pinned to the second core, the upstream and the load on the first (`taskset`, when there are two
cores). Then, interleaved in a fresh random order each round, it measures:

- non-streamed chat at c=1 (p50, p99) and what each relay adds to the upstream's own time;
- time to the first content chunk of a 50-chunk stream, and whole 2,000- and 10,000-chunk streams;
- one tool round (two upstream turns and one mcp-server-time call) beyond the same three parts done
  straight, in the same order;
- throughput at c=16 and c=64, the median of 3 interleaved runs (wrk when installed, else an aiohttp load
  generator);
- HTTP ready and tools ready after start with 1 and 10 stdio servers, and RSS at idle.

    .venv/bin/python -m bench.compare [--rounds 7] [--quick] [--json out.json]
        [--mcp-bridge VENV] [--litellm VENV]

`--json` writes the figures printed (not the samples), with the commit, version, machine and load: what
docs/benchmarks.md keeps per release, to see drift.

Peers, each in its own virtualenv (neither is a dependency of toolbridge):

    python3 -m venv /tmp/mcp-bridge && /tmp/mcp-bridge/bin/pip install --ignore-requires-python \\
        lmos-openai-types && /tmp/mcp-bridge/bin/pip install mcp-bridge==0.5.1 'mcp<2' mcp-server-time
    python3 -m venv /tmp/litellm && /tmp/litellm/bin/pip install 'litellm[proxy]'
"""

import argparse
import asyncio
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
import psutil

from tests.support.servers import free_port

ROOT = Path(__file__).parent.parent
BIN = Path(sys.executable).parent
START_TIMEOUT = 90.0
THROUGHPUT_ROUNDS = 3
QUIET_LOAD = 0.5  # a 1-minute load average above this on two cores moves the figures
SETTLE_SECONDS = 120.0
PLAIN = {"model": "bench", "messages": [{"role": "user", "content": "Say something."}]}
TOOL_ASK = {"model": "bench", "messages": [{"role": "user", "content": "What time is it in UTC?"}]}
TIME_TOOL = {"type": "function", "function": {"name": "get_current_time", "description": "Current time.",
                                              "parameters": {"type": "object", "properties": {
                                                  "timezone": {"type": "string"}}}}}
TWO_CORES = (os.cpu_count() or 1) >= 2 and shutil.which("taskset") is not None


def pinned(args: list[str], core: int) -> list[str]:
    return ["taskset", "-c", str(core), *args] if TWO_CORES else args


@dataclass
class Arm:
    name: str
    base: str  # the /v1 URL
    process: subprocess.Popen[bytes] | None = None
    extra: list[subprocess.Popen[bytes]] = field(default_factory=list)
    has_tools: bool = False

    @property
    def chat(self) -> str:
        return self.base + "/chat/completions"

    def stop(self) -> None:
        for process in [self.process, *self.extra]:
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()


def wait_ready(url: str, process: subprocess.Popen[bytes], timeout: float = START_TIMEOUT,
               headers: dict[str, str] | None = None) -> float:
    """Seconds until `url` answers 200."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args} exited with {process.returncode}")
        try:
            if httpx.get(url, timeout=2, headers=headers).status_code == 200:
                return time.perf_counter() - started
        except httpx.TransportError:
            pass
        time.sleep(0.01)
    raise RuntimeError(f"{url} did not answer within {timeout} s")


def launch(args: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.Popen[bytes]:
    return subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# The gateway's log level (--log-level): warning writes no line a request; the default, info, writes one a request
# and one a tool call (to /dev/null here: their cost is the rendering, not the disk).
gateway_log_level = "warning"


def gateway_env() -> dict[str, str]:
    """The gateway's environment: this checkout's `app` first on the path, so a run from another worktree (a
    before/after comparison) measures that worktree's code, not the one the virtualenv installed in editable mode."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLBRIDGE_")}
    path = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return {**env, "PYTHONPATH": path, "TOOLBRIDGE_STATE_URL": "memory://", "TOOLBRIDGE_LOG_LEVEL": gateway_log_level}


def mcp_config(directory: Path, servers: int) -> Path:
    path = directory / f"mcp-{servers}.json"
    command = str(BIN / "mcp-server-time")
    entries = {("time" if i == 0 else f"time{i}"): {"command": command, "args": []} for i in range(servers)}
    path.write_text(json.dumps({"mcpServers": entries}))
    return path


def start_toolbridge(directory: Path, upstream: str, servers: int, *, core: int | None = 1,
                     name: str = "toolbridge") -> tuple[Arm, float, float]:
    """The arm, seconds to HTTP ready, seconds to every server ready."""
    port = free_port()
    args = [str(BIN / "toolbridge"), "--port", str(port), "--upstream-url", upstream,
            "--mcp-config", str(mcp_config(directory, servers))]
    args = pinned(args, core) if core is not None else args
    started = time.perf_counter()
    process = launch(args, gateway_env())
    arm = Arm(name, f"http://127.0.0.1:{port}/v1", process, has_tools=servers > 0)
    http_ready = wait_ready(f"http://127.0.0.1:{port}/health", process)
    while time.perf_counter() - started < START_TIMEOUT:
        states = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).json()["servers"]
        if len(states) == servers and all(s["state"] == "ready" for s in states.values()):
            return arm, http_ready, time.perf_counter() - started
        time.sleep(0.01)
    arm.stop()
    raise RuntimeError(f"toolbridge's {servers} servers were not ready within {START_TIMEOUT} s")


def start_relay(kind: str, upstream: str) -> Arm:
    port = free_port()
    process = launch(pinned([sys.executable, "-m", "bench.relays", kind, "--port", str(port),
                             "--upstream", upstream], 1))
    arm = Arm(kind, f"http://127.0.0.1:{port}/v1", process, has_tools=kind == "least")
    chat_ready(arm)
    return arm


def chat_ready(arm: Arm, headers: dict[str, str] | None = None) -> None:
    started = time.perf_counter()
    while time.perf_counter() - started < START_TIMEOUT:
        if arm.process is not None and arm.process.poll() is not None:
            raise RuntimeError(f"{arm.name} exited with {arm.process.returncode}")
        try:
            if httpx.post(arm.chat, json=PLAIN, timeout=5, headers=headers).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{arm.name} did not answer a chat within {START_TIMEOUT} s")


def start_mcp_bridge(venv: Path, upstream: str, directory: Path) -> Arm:
    port = free_port()
    config = directory / "mcp-bridge.json"
    config.write_text(json.dumps({
        "inference_server": {"base_url": upstream, "api_key": "none"},
        "mcp_servers": {"time": {"command": str(venv / "bin" / "mcp-server-time"), "args": []}},
        "network": {"host": "127.0.0.1", "port": port},
        "logging": {"log_level": "INFO"},
    }))
    env = {**os.environ, "MCP_BRIDGE__CONFIG__FILE": str(config)}
    process = launch(pinned([str(venv / "bin" / "python"), "-m", "mcp_bridge.main"], 1), env, cwd=directory)
    arm = Arm("MCP-Bridge", f"http://127.0.0.1:{port}/v1", process, has_tools=True)
    chat_ready(arm)
    return arm


LITELLM_KEY = "sk-bench-" + "7f3a9c1e5b2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a"


def start_litellm(venv: Path, upstream: str) -> Arm:
    port = free_port()
    env = {**os.environ, "OPENAI_API_KEY": "sk-mock", "LITELLM_MASTER_KEY": LITELLM_KEY,
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"}
    process = launch(pinned([str(venv / "bin" / "litellm"), "--model", "openai/bench", "--alias", "bench",
                             "--api_base", upstream, "--port", str(port), "--host", "127.0.0.1"], 1), env)
    arm = Arm("LiteLLM", f"http://127.0.0.1:{port}/v1", process)
    chat_ready(arm, {"Authorization": f"Bearer {LITELLM_KEY}"})
    return arm


def headers_for(arm: Arm) -> dict[str, str]:
    return {"Authorization": f"Bearer {LITELLM_KEY}"} if arm.name == "LiteLLM" else {}


# ---- one request, timed -------------------------------------------------------------------------------

def timed_json(client: httpx.Client, arm: Arm, body: dict[str, Any]) -> float:
    started = time.perf_counter()
    response = client.post(arm.chat, json=body, headers=headers_for(arm))
    response.raise_for_status()
    return (time.perf_counter() - started) * 1000


def timed_stream(client: httpx.Client, arm: Arm, chunks: int) -> tuple[float, float, int]:
    """Milliseconds to the first content chunk and to the end, and the content chunks seen."""
    started = time.perf_counter()
    first = None
    seen = 0
    body = {**PLAIN, "stream": True, "max_tokens": chunks}
    with client.stream("POST", arm.chat, json=body, headers=headers_for(arm)) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("data: {") and '"content":"' in line and '"content":""' not in line:
                seen += 1
                if first is None:
                    first = (time.perf_counter() - started) * 1000
    return first or float("nan"), (time.perf_counter() - started) * 1000, seen


class McpDirect:
    """One stdio session with mcp-server-time, driven from a thread so the timed code stays synchronous."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self._stop = asyncio.Event()
        self._ready = threading.Event()
        self._client: Any = None
        self._task = asyncio.run_coroutine_threadsafe(self._hold(), self.loop)
        if not self._ready.wait(60):
            raise RuntimeError("mcp-server-time did not start")

    async def _hold(self) -> None:
        from mcp import Client, StdioServerParameters

        self._stop = asyncio.Event()
        # On the relays' core, as toolbridge's own server is (it inherits the gateway's pinning).
        command = pinned([str(BIN / "mcp-server-time")], 1)
        async with Client(StdioServerParameters(command=command[0], args=command[1:])) as client:
            self._client = client
            self._ready.set()
            await self._stop.wait()

    def call_ms(self) -> float:
        async def call() -> float:
            started = time.perf_counter()
            await self._client.call_tool("get_current_time", {"timezone": "UTC"})
            return (time.perf_counter() - started) * 1000

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(30)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        self._task.result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


# ---- throughput ---------------------------------------------------------------------------------------

def throughput(arm: Arm, connections: int, seconds: float) -> tuple[float, float | None]:
    """Requests a second, non-streamed chat, closed loop with `connections` clients; and the relay's own CPU time a
    request meanwhile (us), steadier than the rate from run to run (None for an arm without a process of its own)."""
    process = psutil.Process(arm.process.pid) if arm.process is not None else None
    cpu_before = sum(process.cpu_times()[:2]) if process is not None else 0.0
    rate = _rate(arm, connections, seconds)
    if process is None or not rate:
        return rate, None
    return rate, (sum(process.cpu_times()[:2]) - cpu_before) / (rate * seconds) * 1e6


def _rate(arm: Arm, connections: int, seconds: float) -> float:
    if shutil.which("wrk"):
        with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
            headers = "".join(f'wrk.headers["{k}"] = "{v}"\n' for k, v in headers_for(arm).items())
            script.write(f'wrk.method = "POST"\nwrk.body = [[{json.dumps(PLAIN)}]]\n'
                         f'wrk.headers["Content-Type"] = "application/json"\n{headers}')
        try:
            out = subprocess.run(pinned(["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "-s", script.name,
                                         arm.chat], 0), capture_output=True, text=True, timeout=seconds + 60).stdout
        finally:
            os.unlink(script.name)
        errors = [line for line in out.splitlines() if "Non-2xx" in line or "Socket errors" in line]
        if errors:
            print(f"  ! {arm.name} c={connections}: {'; '.join(e.strip() for e in errors)}")
        return float(next(line.split()[1] for line in out.splitlines() if line.startswith("Requests/sec")))
    code = (
        "import asyncio,json,sys,time,aiohttp\n"
        "url,c,d,h=sys.argv[1],int(sys.argv[2]),float(sys.argv[3]),json.loads(sys.argv[4])\n"
        f"body={json.dumps(PLAIN)!r}.encode()\n"
        "async def main():\n"
        "  done=0;end=time.perf_counter()+d\n"
        "  async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=c)) as s:\n"
        "    async def worker():\n"
        "      nonlocal done\n"
        "      while time.perf_counter()<end:\n"
        "        async with s.post(url,data=body,headers={'content-type':'application/json',**h}) as r:\n"
        "          await r.read(); done+=r.status==200\n"
        "    await asyncio.gather(*[worker() for _ in range(c)])\n"
        "  print(done/d)\n"
        "asyncio.run(main())\n"
    )
    out = subprocess.run(pinned([sys.executable, "-c", code, arm.chat, str(connections), str(seconds),
                                 json.dumps(headers_for(arm))], 0), capture_output=True, text=True,
                         timeout=seconds + 60)
    return float(out.stdout.strip())


def measure_throughput(arms: list[Arm], seconds: float, rounds: int = THROUGHPUT_ROUNDS) -> dict[str, float]:
    """"NAME c=N" -> the median of `rounds` runs, every arm and concurrency once a round in a fresh random
    order (one run each moved c=64 / c=16 by 0.15 from one run of the benchmark to the next); and "NAME c=N cpu",
    the median of the relay's CPU time a request (us) in those runs."""
    runs: dict[str, list[float]] = defaultdict(list)
    cases = [(arm, connections) for arm in arms for connections in (16, 64)]
    for arm, connections in cases:
        throughput(arm, connections, 1.0)  # warm
    for _ in range(rounds):
        random.shuffle(cases)
        for arm, connections in cases:
            rate, cpu = throughput(arm, connections, seconds)
            runs[f"{arm.name} c={connections}"].append(rate)
            if cpu is not None:
                runs[f"{arm.name} c={connections} cpu"].append(cpu)
    return {name: statistics.median(values) for name, values in runs.items()}


# ---- the run ------------------------------------------------------------------------------------------

def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@contextmanager
def running(arms: list[Arm]) -> Iterator[list[Arm]]:
    try:
        yield arms
    finally:
        for arm in arms:
            arm.stop()


def startup(directory: Path, upstream: str, servers: int, tries: int) -> tuple[float, float]:
    """Unpinned: the servers a gateway starts inherit its core, and ten on one core is no real machine."""
    http, tools = [], []
    for _ in range(tries):
        arm, http_ready, tools_ready = start_toolbridge(directory, upstream, servers, name="startup", core=None)
        arm.stop()
        http.append(http_ready)
        tools.append(tools_ready)
    return statistics.median(http), statistics.median(tools)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=60, help="non-streamed requests per arm and round")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each throughput run")
    parser.add_argument("--quick", action="store_true", help="3 rounds, fewer requests, 1 s throughput runs")
    parser.add_argument("--mcp-bridge", type=Path, help="virtualenv with mcp-bridge 0.5.1 installed")
    parser.add_argument("--litellm", type=Path, help="virtualenv with litellm[proxy] installed")
    parser.add_argument("--skip", default="", help="comma-separated parts to leave out: throughput,startup")
    parser.add_argument("--json", type=Path, help="write the figures there too (what docs/benchmarks/ keeps)")
    parser.add_argument("--against", type=Path, help="a release's figures (docs/benchmarks/VERSION.json): the drift")
    parser.add_argument("--log-level", default="warning", choices=["info", "warning"],
                        help="toolbridge's (info, its default, logs a line a request and a tool call)")
    args = parser.parse_args()
    global gateway_log_level
    gateway_log_level = args.log_level
    if args.quick:
        args.rounds, args.requests, args.seconds = 3, 25, 1.0
    skip = set(filter(None, args.skip.split(",")))
    settle_until = time.monotonic() + SETTLE_SECONDS
    while os.getloadavg()[0] > QUIET_LOAD and time.monotonic() < settle_until:  # what ran before us
        time.sleep(2)
    load_before = os.getloadavg()[0]
    if load_before > QUIET_LOAD:
        print(f"warning: the machine is busy (1-minute load {load_before:.2f}); figures will be noisy")

    work = Path(tempfile.mkdtemp(prefix="toolbridge-compare-"))
    upstream_port = free_port()
    upstream = f"http://127.0.0.1:{upstream_port}/v1"
    upstream_process = launch(pinned([sys.executable, "-m", "bench.upstream", "--port", str(upstream_port)], 0))
    figures: dict[str, Any] = {}
    try:
        wait_ready(upstream + "/models", upstream_process)
        direct = Arm("direct", upstream)
        arms: list[Arm] = []
        with running(arms):
            arms.append(start_relay("naive", upstream))
            arms.append(start_relay("floor", upstream))
            arms.append(start_relay("fastapi", upstream))
            arms.append(start_relay("least", upstream))
            bare, _, _ = start_toolbridge(work, upstream, 0)
            arms.append(bare)
            with_mcp, _, _ = start_toolbridge(work, upstream, 1, name="toolbridge+mcp")
            arms.append(with_mcp)
            time.sleep(1.0)  # let the start settle before reading memory
            figures["rss_idle_mb"] = {a.name: rss_mb(a) for a in arms}
            if args.mcp_bridge:
                arms.append(start_mcp_bridge(args.mcp_bridge, upstream, work))
            if args.litellm:
                arms.append(start_litellm(args.litellm, upstream))
            figures["rss_idle_mb"].update({a.name: rss_mb(a) for a in arms if a.name not in figures["rss_idle_mb"]})
            every = [direct, *arms]
            mcp = McpDirect()
            try:
                samples = measure_latency(every, mcp, args.rounds, args.requests)
            finally:
                mcp.close()
            figures["latency"] = samples
            if "throughput" not in skip:
                figures["rps"] = measure_throughput(every, args.seconds)
            figures["rss_after_mb"] = {a.name: rss_mb(a) for a in arms}
        if "startup" not in skip:
            figures["startup"] = {n: startup(work, upstream, n, 3 if not args.quick else 1) for n in (1, 10)}
    finally:
        upstream_process.terminate()
        upstream_process.wait(30)
        shutil.rmtree(work, ignore_errors=True)
    figures["load"] = [load_before, os.getloadavg()[0]]
    figures["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                       text=True).stdout.strip()
    names = [a.name for a in every]
    report(figures, names, args)
    facts = summary(figures, names, args)
    if args.against:
        print(drift(json.loads(args.against.read_text()), facts))
    if args.json:
        args.json.write_text(json.dumps(facts, indent=1) + "\n")


def rss_mb(arm: Arm) -> float:
    if arm.process is None:
        return float("nan")
    process = psutil.Process(arm.process.pid)
    if process.name() == "taskset":  # exec'd in place, but be sure
        process = process.children()[0] if process.children() else process
    return process.memory_info().rss / 2**20


@contextmanager
def on_load_core() -> Iterator[None]:
    """This process (the latency client) on the load's core while it measures. Left to float, it shared the
    relays' core now and then, and an arm's first token moved by 0.7 ms from one run to the next."""
    if not TWO_CORES:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {0})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)  # what it starts later (the startup runs) must float again


def measure_latency(arms: list[Arm], mcp: McpDirect, rounds: int, requests: int) -> dict[str, list[list[float]]]:
    """name -> one list of samples per round."""
    with on_load_core():
        return _measure_latency(arms, mcp, rounds, requests)


def _measure_latency(arms: list[Arm], mcp: McpDirect, rounds: int, requests: int) -> dict[str, list[list[float]]]:
    samples: dict[str, list[list[float]]] = defaultdict(list)
    tool_reply = [*TOOL_ASK["messages"],
                  {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {
                      "name": "get_current_time", "arguments": '{"timezone":"UTC"}'}}]},
                  {"role": "tool", "tool_call_id": "call_1", "content": '{"timezone":"UTC"}'}]
    with httpx.Client(timeout=60) as client:
        for arm in arms:  # warm every path once
            for _ in range(5):
                timed_json(client, arm, PLAIN)
                timed_stream(client, arm, 50)
        cases: list[tuple[str, Callable[[], dict[str, float]], int]] = []
        for arm in arms:
            cases += [
                (f"{arm.name}|json", lambda a=arm: {"": timed_json(client, a, PLAIN)}, requests),
                (f"{arm.name}|stream50", lambda a=arm: dict(zip(("ttft", "total"), timed_stream(client, a, 50)[:2],
                                                                 strict=True)), requests // 2),
                (f"{arm.name}|stream2000", lambda a=arm: {"total": timed_stream(client, a, 2000)[1]}, 5),
                (f"{arm.name}|stream10000", lambda a=arm: {"total": timed_stream(client, a, 10000)[1]}, 2),
            ]
            if arm.has_tools:
                cases.append((f"{arm.name}|tool", lambda a=arm: {"": timed_json(client, a, TOOL_ASK)}, requests))
        direct = arms[0]
        cases += [
            ("parts", lambda: parts_in_turn(client, direct, mcp, tool_reply), requests),
        ]
        for _ in range(rounds):
            random.shuffle(cases)
            for name, run, count in cases:
                collected: dict[str, list[float]] = defaultdict(list)
                for _ in range(count):
                    for key, value in run().items():
                        collected[key].append(value)
                for key, values in collected.items():
                    samples[f"{name}{'|' + key if key else ''}"].append(values)
    return samples


def parts_in_turn(client: httpx.Client, direct: Arm, mcp: McpDirect, tool_reply: list[dict[str, Any]]
                  ) -> dict[str, float]:
    """A tool round's three parts done straight, in the round's order. In turn, not each part back to back:
    on this machine a stdio server called after a 2 ms pause answers in 2.0 ms, called back to back in
    1.0 ms (`mcp-server-time`, the same SDK client), so parts timed back to back would flatter the sum."""
    asked = timed_json(client, direct, {**TOOL_ASK, "tools": [TIME_TOOL]})
    called = mcp.call_ms()
    answered = timed_json(client, direct, {**PLAIN, "messages": tool_reply})
    return {"": asked + called + answered, "turn1": asked, "mcp": called, "turn2": answered}


def summary(figures: dict[str, Any], names: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """The figures printed, per arm, with what they were measured on: `--json` writes this."""
    latency = figures["latency"]

    def p50(name: str) -> float:
        return statistics.median(statistics.median(r) for r in latency[name])

    def p99(name: str) -> float:
        return statistics.median(percentile(r, 0.99) for r in latency[name])

    direct_json, direct_ttft = p50("direct|json"), p50("direct|stream50|ttft")
    parts = p50("parts")
    rps = figures.get("rps", {})
    arms: dict[str, dict[str, float]] = {}
    for n in names:
        arm = arms[n] = {"chat_p50_ms": p50(f"{n}|json"), "first_token_ms": p50(f"{n}|stream50|ttft")}
        for chunks in (2000, 10000):
            arm[f"stream{chunks}_ms"] = p50(f"{n}|stream{chunks}|total")
            arm[f"stream{chunks}_x_direct"] = arm[f"stream{chunks}_ms"] / p50(f"direct|stream{chunks}|total")
        if n != "direct":
            arm |= {"added_p50_ms": arm["chat_p50_ms"] - direct_json,
                    "added_p99_ms": p99(f"{n}|json") - p99("direct|json"),
                    "first_token_added_ms": arm["first_token_ms"] - direct_ttft}
        if f"{n}|tool" in latency:
            arm |= {"tool_round_ms": p50(f"{n}|tool"), "tool_round_beyond_parts_ms": p50(f"{n}|tool") - parts,
                    "tool_round_beyond_x_parts": (p50(f"{n}|tool") - parts) / parts}
        arm |= {f"rps_c{c}": rps[f"{n} c={c}"] for c in (16, 64) if f"{n} c={c}" in rps}
        if f"{n} c=64 cpu" in rps:
            arm["cpu_us_c64"] = rps[f"{n} c=64 cpu"]
        if "rps_c64" in arm:
            arm["rps_c64_x_c16"] = arm["rps_c64"] / arm["rps_c16"]
        for key in ("rss_idle_mb", "rss_after_mb"):
            if n in figures.get(key, {}):
                arm[key] = figures[key][n]
    for n, arm in arms.items():  # beside the floor relay, as issue 47 states its goals
        if n not in ("direct", "floor") and "floor" in arms:
            arm["added_p50_x_floor"] = arm["added_p50_ms"] / arms["floor"]["added_p50_ms"]
            if "rps_c64" in arm:
                arm["rps_c64_x_floor"] = arm["rps_c64"] / arms["floor"]["rps_c64"]
    return {
        "commit": figures.get("commit", ""), "version": version("toolbridge"), "date": time.strftime("%Y-%m-%d"),
        "machine": f"{os.cpu_count()} cpus, {platform.machine()}, {platform.python_implementation()} "
                   f"{platform.python_version()}", "pinned": TWO_CORES, "rounds": args.rounds,
        "log_level": args.log_level, "load": figures["load"],
        "parts_ms": {"all": parts, "turn1": p50("parts|turn1"), "mcp": p50("parts|mcp"), "turn2": p50("parts|turn2")},
        "arms": arms,
        "startup_s": {str(n): {"http": http, "tools": tools}
                      for n, (http, tools) in figures.get("startup", {}).items()},
    }


DRIFT_FIGURES = ("added_p50_ms", "added_p50_x_floor", "tool_round_beyond_parts_ms", "tool_round_beyond_x_parts",
                 "rps_c64", "rps_c64_x_floor", "rss_idle_mb")


def drift(before: dict[str, Any], now: dict[str, Any]) -> str:
    """toolbridge's figures beside a release's, each with its change: ratios to the floor and to the parts are what
    carry from one machine to another; the absolute figures only on the same one."""
    lines = [f"\nagainst {before['version']} ({before['commit']}, {before['date']}, {before['machine']}):"]
    levels = before.get("log_level", "warning"), now.get("log_level", "warning")  # releases up to 0.1.0: warning
    if levels[0] != levels[1]:
        lines.append(f"  (unlike runs: toolbridge logged at {levels[0]} then, at {levels[1]} now)")
    for arm in ("toolbridge", "toolbridge+mcp"):
        old, new = before["arms"].get(arm, {}), now["arms"].get(arm, {})
        for key in DRIFT_FIGURES:
            if key in old and key in new:
                change = (new[key] - old[key]) / abs(old[key]) if old[key] else 0.0
                lines.append(f"  {arm:16} {key:28} {old[key]:10.2f} -> {new[key]:10.2f}  {change:+.0%}")
    return "\n".join(lines)


def report(figures: dict[str, Any], names: list[str], args: argparse.Namespace) -> None:
    facts = summary(figures, names, args)
    arms = facts["arms"]
    print(f"\nmachine: {facts['machine']}; pinned: {facts['pinned']}; toolbridge at log level {facts['log_level']}; "
          f"1-minute load {facts['load'][0]:.2f} "
          f"before, {facts['load'][1]:.2f} after; {args.rounds} rounds, interleaved at random; medians of round "
          "medians")
    width = max(12, *(len(n) + 2 for n in names))
    print("\n" + "figure".ljust(34) + "".join(n.rjust(width) for n in names))

    def row(label: str, key: str, form: str) -> None:
        cells = [form.format(arms[n][key]) if key in arms[n] else "" for n in names]
        if any(cells):
            print(label.ljust(34) + "".join(c.rjust(width) for c in cells))

    row("chat p50, c=1 (ms)", "chat_p50_ms", "{:.2f}")
    row("  added p50 (ms)", "added_p50_ms", "+{:.2f}")
    row("  added p99 (ms)", "added_p99_ms", "+{:.2f}")
    row("  added / floor's added", "added_p50_x_floor", "{:.2f}x")
    row("first token, 50 chunks (ms)", "first_token_ms", "{:.2f}")
    row("  added (ms)", "first_token_added_ms", "+{:.2f}")
    for chunks in (2000, 10000):
        row(f"{chunks}-chunk stream (ms)", f"stream{chunks}_ms", "{:.1f}")
        row("  x direct", f"stream{chunks}_x_direct", "{:.2f}x")
    row("tool round (ms)", "tool_round_ms", "{:.2f}")
    row("  beyond its parts (ms)", "tool_round_beyond_parts_ms", "+{:.2f}")
    row("  beyond / parts", "tool_round_beyond_x_parts", "{:.2f}x")
    parts = facts["parts_ms"]
    print(f"  (parts, done straight in turn: {parts['all']:.2f} ms; upstream turns {parts['turn1']:.2f} + "
          f"{parts['turn2']:.2f} ms, mcp-server-time call {parts['mcp']:.2f} ms)")
    row("throughput c=16 (RPS)", "rps_c16", "{:.0f}")
    row("throughput c=64 (RPS)", "rps_c64", "{:.0f}")
    row("  c=64 / c=16", "rps_c64_x_c16", "{:.2f}")
    row("  x floor (c=64)", "rps_c64_x_floor", "{:.2f}x")
    row("  relay's CPU a request, c=64 (us)", "cpu_us_c64", "{:.0f}")
    row("RSS idle (MB)", "rss_idle_mb", "{:.0f}")
    row("RSS after the run (MB)", "rss_after_mb", "{:.0f}")
    for servers, ready in facts["startup_s"].items():
        print(f"toolbridge start with {servers} stdio server(s): HTTP ready {ready['http']:.2f} s, "
              f"tools ready {ready['tools']:.2f} s")


if __name__ == "__main__":
    main()
