"""Scale figures, each beside 20 tools: what ranking costs a request with 1,000 tools (time and the index's
memory), a gateway's start with 50 stdio MCP servers of 20 tools (1,000 tools), a chat request's overhead
with 1,000 tools mounted, ranked into an 8k context or all sent (TOOLBRIDGE_TOOL_BUDGET=0), and how long a
rebuild of the catalogue holds the event loop (a task that asks to run every millisecond meanwhile).

The tools are the 155 recorded from twelve popular MCP servers (bench/eval/catalogue/), repeated with numbered
names past 155 (bench/scale_catalogue.py); each MCP server is bench/many_tools_server.py. The model is
bench/scale_upstream.py, which answers at once and reports what it was sent. Figures are printed, never
checked: on a shared machine they say as much about the load as about the code (the load is printed). Every
process started is stopped at the end, the MCP servers with their gateway (a survivor is killed and said).

    .venv/bin/python -m bench.scale                     # 50 servers take many minutes to start: see --limit
    .venv/bin/python -m bench.scale --quick             # fewer runs, start-up given at most 240 s
    .venv/bin/python -m bench.scale --skip startup      # ranking, a request's overhead, rebuilds: about 3 minutes
    .venv/bin/python -m bench.scale --skip startup --source /tmp/before   # the same of another checkout's app/

`--source DIR` puts DIR first on the path of this process and of every one it starts (the gateways run `python -m
app` from a temporary directory, with this checkout's app/ by default): ranking, rebuilds and the gateways run that
checkout's app/, on its own API (before issue 47 a request's ranking worked out its tools' data itself, and a
rebuild ran on the event loop), with this checkout's bench."""

import argparse
import asyncio
import gc
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import psutil

from bench.scale_catalogue import openai_tools
from tests.support.servers import free_port

ROOT = Path(__file__).resolve().parent.parent
SERVER = Path(__file__).resolve().parent / "many_tools_server.py"
SIZES = (20, 155, 1000)
TOOLS_PER_SERVER = 20
CONTEXT_TOKENS = 8192
DEFAULT_BUDGET, DEFAULT_MIN_MCP = 24, 4  # TOOLBRIDGE_TOOL_BUDGET and TOOLBRIDGE_MIN_MCP_TOOLS as shipped
START_TIMEOUT = 1200.0
STOP_GRACE = 60.0
REBUILDS = 5  # of each kind, at each size
SOURCE: Path | None = None  # --source: the checkout whose app/ is measured
# Everyday requests that do not name a tool (none says "time": the stand-in model would call a time tool).
REQUESTS = [
    "What do you remember about Alice?",
    "Open example.com in the browser and tell me what it says",
    "Scale the web deployment to 5 replicas",
    "Find open issues about login errors in our repository",
    "Search the web for reviews of the new Framework laptop",
    "Show me the pods that keep restarting in the default namespace",
    "Add a page to my Notion workspace with these meeting notes",
    "How many orders did we get last week? The table is called orders",
    "Get the documentation for the React useEffect hook",
    "Crawl the docs site and summarise its pages",
    "Think this through step by step before you answer: should we migrate?",
    "Take a screenshot of the page after clicking the login button",
]
MODES = {"ranked, 8k context": {"TOOLBRIDGE_CONTEXT_TOKENS": str(CONTEXT_TOKENS)},
         "budget off": {"TOOLBRIDGE_TOOL_BUDGET": "0"}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs and requests")
    parser.add_argument("--skip", default="",
                        help="comma-separated parts to leave out: ranking,overhead,rebuild,startup")
    parser.add_argument("--servers", default="1,10,50", help="start-up: how many servers of 20 tools, in turn")
    parser.add_argument("--limit", type=float, default=START_TIMEOUT, help="start-up: seconds to wait at most")
    parser.add_argument("--source", type=Path, help="a checkout whose app/ is measured instead of this one's")
    parser.add_argument("--index-memory", type=int, help=argparse.SUPPRESS)  # the child that weighs one index
    parser.add_argument("--rebuild-holds", type=int, help=argparse.SUPPRESS)  # the child that rebuilds at one size
    args = parser.parse_args()
    if args.source:
        global SOURCE
        SOURCE = args.source.resolve()
        sys.path.insert(0, str(SOURCE))
    if args.index_memory:
        print(json.dumps(weigh_index(args.index_memory)))
        return
    if args.rebuild_holds:
        print(json.dumps(asyncio.run(rebuild_holds(args.rebuild_holds, REBUILDS))))
        return
    skip = set(filter(None, args.skip.split(",")))
    import app

    print(f"{os.cpu_count()} cores, 1-minute load {os.getloadavg()[0]:.1f} at the start; app/ of"
          f" {Path(app.__file__).parent.parent}")
    if "ranking" not in skip:
        ranking_figures(runs=15 if args.quick else 60)
    if {"overhead", "startup"} - skip:
        setups = [(int(n), TOOLS_PER_SERVER) for n in args.servers.split(",")]
        gateway_figures(15 if args.quick else 60, setups, min(args.limit, 240) if args.quick else args.limit, skip)
    if "rebuild" not in skip:
        rebuild_figures()
    print(f"1-minute load {os.getloadavg()[0]:.1f} at the end")


# ---- 1. ranking: time and memory -----------------------------------------------------------------------

def messages(number: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": REQUESTS[number % len(REQUESTS)]}]


def budget() -> Any:
    """What a request is given by default with an 8k context: 24 tools, at most half the context, at least 4."""
    from app.chat.offer.tool_budget import budget_for

    return budget_for(DEFAULT_BUDGET, CONTEXT_TOKENS, False, DEFAULT_MIN_MCP)


def prepared(tools: list[dict[str, Any]]) -> Any:
    """A catalogue's tools as the gateway's requests rank them: with their ranking data, worked out once when the
    catalogue is built (app/chat/offer/tool_ranking.py); before issue 47, as they are (each request worked out
    what it needed, the index cached by the tools' documents)."""
    try:
        from app.chat.offer.tool_ranking import ToolIndex
    except ImportError:
        return tools
    return ToolIndex.of(tools, {})


def rank(tools: Any, number: int) -> Any:
    from app.chat.offer.tool_budget import choose_within

    return choose_within(tools, [], messages(number), budget())


def rank_times(count: int, runs: int) -> tuple[list[float], list[float], float]:
    """Milliseconds of each cold request (a catalogue not seen before: its ranking data worked out, then ranked)
    and each warm one (the same catalogue again, another user message), and how many tools a warm one kept (the
    median)."""
    cold, warm, kept = [], [], []
    for run in range(runs):
        tools = openai_tools(count, tag=f"c{run}")  # a fresh catalogue: its documents are not cached
        started = time.perf_counter()
        ready = prepared(tools)
        rank(ready, run)
        cold.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        choice = rank(ready, run + 1)
        warm.append((time.perf_counter() - started) * 1000)
        kept.append(count if choice is None else count - len(choice.withheld))
    return cold, warm, statistics.median(kept)


def weigh_index(count: int) -> dict[str, float]:
    """In a fresh process: the RSS one catalogue's first ranking adds (its data kept, as the catalogue keeps it),
    then under tracemalloc, for another catalogue of the same size, the peak while ranking and what stays after."""
    rank(prepared(openai_tools(8, tag="warm")), 0)  # bm25s, numpy and the code loaded
    first, second = openai_tools(count, tag="a"), openai_tools(count, tag="b")
    gc.collect()
    process = psutil.Process()
    before = process.memory_info().rss
    kept_first = prepared(first)
    rank(kept_first, 1)
    gc.collect()
    grown = process.memory_info().rss - before
    tracemalloc.start()
    kept_second = prepared(second)
    rank(kept_second, 2)
    gc.collect()
    kept, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del kept_first, kept_second
    return {"rss_growth": grown / 2**20, "peak": peak / 2**20, "kept": kept / 2**20}


def ranking_figures(runs: int) -> None:
    rank_times(20, 2)  # imports and first calls out of the way
    print(f"\n1. Ranking one request (choose_within, default budget {DEFAULT_BUDGET} tools, {CONTEXT_TOKENS}-token"
          f" context), {runs} runs; the index's memory in a fresh process")
    print(f"{'tools':>6} {'offered':>7} {'cold p50':>9} {'cold p95':>9} {'warm p50':>9} {'warm p95':>9}"
          f" {'tracemalloc peak':>17} {'retained':>11} {'RSS growth':>11}")
    for count in SIZES:
        cold, warm, kept = rank_times(count, runs)
        memory = json.loads(child("--index-memory", str(count)))
        print(f"{count:>6} {kept:>7.0f} {ms(median(cold))} {ms(p95(cold))} {ms(median(warm))} {ms(p95(warm))}"
              f" {memory['peak']:>14.1f} MB {memory['kept']:>8.1f} MB {memory['rss_growth']:>8.1f} MB", flush=True)


def child(*args: str) -> str:
    """The last line a fresh process of this module prints (on the same checkout's app/; the pool logs before)."""
    source = ["--source", str(SOURCE)] if SOURCE else []
    return subprocess.run([sys.executable, "-m", "bench.scale", *args, *source], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip().splitlines()[-1]


# ---- 4. rebuilds: the event loop held --------------------------------------------------------------------------

async def held_while(work: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """The longest gap between two runs of a task that asks to run every millisecond while `work` runs (the event
    loop's longest hold, plus that millisecond), and how long `work` took; both in ms."""
    longest, done = 0.0, False

    async def tick() -> None:
        nonlocal longest
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            longest, last = max(longest, now - last), now

    ticking = asyncio.create_task(tick())
    await asyncio.sleep(0.01)
    started = time.perf_counter()
    await work()
    took = time.perf_counter() - started
    done = True
    await ticking
    return longest * 1000, took * 1000


async def rebuild_holds(count: int, runs: int) -> dict[str, Any]:
    """One stdio server of `count` tools (and its `change_list`) in a pool as the gateway makes it (its garbage
    collection tuned, the ranking data worked out with each catalogue where the checkout does): the loop's longest
    hold while the pool rebuilds its catalogue, `runs` times, and while a changed tool list is taken up (the
    server's notice, the list read again, the rebuild), `runs` times; and, for comparison, while nothing happens
    for 0.3 s."""
    from app.cli import _tune_garbage_collection
    from app.mcp.config import McpConfig, StdioServerConfig
    from app.mcp.pool import McpPool
    from app.mcp.supervisor import PoolOptions

    _tune_garbage_collection()  # as `toolbridge` does before it serves: what the imports made, frozen
    server = StdioServerConfig(command=sys.executable, args=[str(SERVER), "--count", str(count), "--changing"],
                               mode="legacy")
    extra: dict[str, Any] = {}
    if "prepare" in inspect.signature(McpPool).parameters:
        from app.chat import prepare_ranking

        extra["prepare"] = prepare_ranking
    pool = McpPool(McpConfig(path=Path("bench-mcp.json"), found=True, servers={"s00": server}),
                   PoolOptions(connect_timeout=START_TIMEOUT, call_timeout=60), **extra)

    async def rebuild() -> None:
        rebuilt = pool._rebuild_catalogue()  # on the event loop before issue 47; awaited since
        if inspect.isawaitable(rebuilt):
            await rebuilt

    changed = 0

    async def change() -> None:
        nonlocal changed
        changed += 1
        await pool.call_tool("s00__change_list", "{}")  # adds added_1, added_2, ...
        while not pool.catalogue.owns(f"s00__added_{changed}"):
            await pool.next_change()

    async with pool:
        await asyncio.wait_for(pool.wait_settled(), START_TIMEOUT)
        tools = len(pool.catalogue.openai_tools)
        idle = await held_while(lambda: asyncio.sleep(0.3))
        rebuilds = [await held_while(rebuild) for _ in range(runs)]
        changes = [await held_while(change) for _ in range(runs)]
    return {"tools": tools, "idle": idle[0], "rebuild_hold": [hold for hold, _ in rebuilds],
            "rebuild_ms": [took for _, took in rebuilds], "change_hold": [hold for hold, _ in changes],
            "change_ms": [took for _, took in changes]}


def rebuild_figures() -> None:
    print(f"\n4. A rebuild of the catalogue: the event loop's longest hold (the longest gap between two runs of a task"
          f" that asks to run every 1 ms), {REBUILDS} rebuilds and {REBUILDS} changed lists at each size, one stdio"
          " server, in a fresh process; the same while nothing happens, for comparison")
    print(f"{'tools':>6} {'idle':>8} {'rebuild hold p50':>17} {'max':>9} {'rebuild took p50':>17}"
          f" {'list change hold p50':>21} {'max':>9} {'took p50':>10}")
    for count in SIZES:
        held = json.loads(child("--rebuild-holds", str(count)))
        print(f"{held['tools']:>6} {ms(held['idle'], 5)} {ms(median(held['rebuild_hold']), 14)}"
              f" {ms(max(held['rebuild_hold']))} {ms(median(held['rebuild_ms']), 14)}"
              f" {ms(median(held['change_hold']), 18)} {ms(max(held['change_hold']))}"
              f" {ms(median(held['change_ms']), 7)}", flush=True)


# ---- 2 and 3. gateways -------------------------------------------------------------------------------------

@dataclass
class Gateway:
    process: subprocess.Popen[bytes]
    base: str
    servers: int
    http_ready: float = 0.0
    curve: list[tuple[float, int, int]] = field(default_factory=list)  # (seconds, servers ready, tools) as it rose
    family: list[psutil.Process] = field(default_factory=list)
    stop_seconds: float = 0.0

    @property
    def ready(self) -> int:
        return self.curve[-1][1] if self.curve else 0

    @property
    def tools(self) -> int:
        return self.curve[-1][2] if self.curve else 0

    def seconds_to(self, servers: int) -> float | None:
        return next((seconds for seconds, ready, _ in self.curve if ready >= servers), None)

    def rss(self) -> tuple[float, float, int]:
        """The gateway's RSS, its children's together (MB), and how many children."""
        parent = psutil.Process(self.process.pid)
        children = parent.children(recursive=True)
        total = sum(child.memory_info().rss for child in children if child.is_running())
        return parent.memory_info().rss / 2**20, total / 2**20, len(children)


def mcp_config(directory: Path, servers: int, tools_each: int) -> Path:
    path = directory / f"mcp-{servers}x{tools_each}.json"
    entries = {f"s{n:02d}": {"command": sys.executable,
                             "args": [str(SERVER), "--count", str(tools_each), "--offset", str(n * tools_each)]}
               for n in range(servers)}
    path.write_text(json.dumps({"mcpServers": entries}))
    return path


@contextmanager
def gateway(directory: Path, upstream: str, servers: int, tools_each: int, settings: dict[str, str],
            limit: float = START_TIMEOUT) -> Iterator[Gateway]:
    """`toolbridge` with `servers` stdio servers of `tools_each` tools, watched from its start until every
    server is ready (or `limit` seconds); stopped after with every process it started."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLBRIDGE_")}
    # Servers wait their turn to start while the gateway is busy: none must fail for it, only be counted late.
    env |= {"TOOLBRIDGE_STATE_URL": "memory://", "TOOLBRIDGE_LOG_LEVEL": "warning",
            "TOOLBRIDGE_MCP_CONNECT_TIMEOUT": str(int(START_TIMEOUT)), **settings}
    # The app/ measured (this checkout's by default), whichever checkout the venv's editable install points at.
    env["PYTHONPATH"] = str(SOURCE or ROOT)
    port = free_port()
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "app", "--port", str(port), "--upstream-url", upstream,
                                "--mcp-config", str(mcp_config(directory, servers, tools_each))],
                               cwd=directory, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    running = Gateway(process, f"http://127.0.0.1:{port}", servers)
    try:
        watch_start(running, started, limit)
        yield running
    finally:
        stop(running)


def watch_start(running: Gateway, started: float, limit: float) -> None:
    """Polls /health until every server is ready or `limit` seconds have gone, noting each rise."""
    while time.perf_counter() - started < limit:
        if running.process.poll() is not None:
            raise RuntimeError(f"toolbridge exited with {running.process.returncode}")
        try:
            health = httpx.get(f"{running.base}/health", timeout=limit).json()
        except httpx.TransportError:
            time.sleep(0.02)
            continue
        seconds = time.perf_counter() - started
        running.http_ready = running.http_ready or seconds
        ready = sum(state["state"] == "ready" for state in health["servers"].values())
        if ready != running.ready or not running.curve:
            running.curve.append((seconds, ready, health["tools"]))
        if ready == running.servers:
            return
        time.sleep(0.05)


def stop(running: Gateway) -> None:
    """SIGTERM, a minute's grace, then SIGKILL; then whatever it started that is still there is killed."""
    started = time.perf_counter()
    with suppress(psutil.NoSuchProcess):
        running.family = psutil.Process(running.process.pid).children(recursive=True)
    running.process.terminate()
    try:
        running.process.wait(timeout=STOP_GRACE)
    except subprocess.TimeoutExpired:
        with suppress(psutil.NoSuchProcess):  # children started since the first look are killed too
            running.family += psutil.Process(running.process.pid).children(recursive=True)
        running.process.kill()
        running.process.wait(timeout=10)
        print(f"  the gateway had not stopped {STOP_GRACE:g} s after SIGTERM: killed")
    running.stop_seconds = time.perf_counter() - started
    _, alive = psutil.wait_procs(running.family, timeout=10)
    for child in alive:
        with suppress(psutil.NoSuchProcess):
            child.kill()
    if alive:
        print(f"  {len(alive)} of the gateway's processes outlived it and were killed")


@contextmanager
def stand_in_model() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "bench.scale_upstream", "--port", str(port)], cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{base}/v1/models", timeout=2)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the stand-in model did not start") from None
                time.sleep(0.05)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)


def startup_figures(model: str, directory: Path, setups: list[tuple[int, int]], limit: float) -> None:
    print(f"\n2. Start-up: from the process's start to every server ready in /health (stdio servers of"
          f" bench/many_tools_server.py, TOOLBRIDGE_MCP_CONNECT_TIMEOUT={START_TIMEOUT:g}, at most {limit:g} s),"
          " and memory once ready")
    print(f"{'servers':>7} {'tools':>6} {'HTTP up':>8} {'first ready':>12} {'half ready':>11} {'all ready':>10}"
          f" {'gateway RSS':>12} {'servers RSS (n)':>17} {'stop':>7}")
    for servers, tools_each in setups:
        with gateway(directory, model, servers, tools_each, {}, limit) as running:
            rss = running.rss()
        every = running.seconds_to(servers)
        print(f"{servers:>7} {running.tools:>6} {running.http_ready:>6.2f} s {seconds(running.seconds_to(1)):>12}"
              f" {seconds(running.seconds_to((servers + 1) // 2)):>11}"
              f" {seconds(every) if every else f'{running.ready}/{servers}':>10}"
              f" {rss[0]:>9.0f} MB {rss[1]:>10.0f} MB ({rss[2]}) {running.stop_seconds:>5.1f} s", flush=True)
        if every is None:
            print(f"  after {limit:g} s: {running.ready} of {servers} servers ready; the rises (s, ready, tools): "
                  + ", ".join(f"{s:.0f}/{r}/{t}" for s, r, t in running.curve[:: max(1, len(running.curve) // 12)]))


@dataclass
class Timings:
    plain: list[float] = field(default_factory=list)  # whole non-streamed answer, ms
    first: list[float] = field(default_factory=list)  # first content chunk of a stream, ms
    whole: list[float] = field(default_factory=list)  # whole stream, ms


def one_request(client: openai.OpenAI, number: int, into: Timings) -> None:
    started = time.perf_counter()
    reply = client.chat.completions.create(model="bench", messages=messages(number))  # type: ignore[arg-type]
    into.plain.append((time.perf_counter() - started) * 1000)
    assert reply.choices[0].message.content, "the stand-in answers with words"
    started = time.perf_counter()
    first = None
    for chunk in client.chat.completions.create(model="bench", messages=messages(number),  # type: ignore[arg-type]
                                                stream=True, max_tokens=50):
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = (time.perf_counter() - started) * 1000
    into.whole.append((time.perf_counter() - started) * 1000)
    into.first.append(first if first is not None else float("nan"))


def measure_requests(model: str, running: Gateway, requests: int) -> tuple[Timings, Timings, list[dict[str, Any]]]:
    """Straight to the model and through the gateway, in turn, request after request; and what the gateway
    sent the model each time."""
    direct = openai.OpenAI(base_url=f"{model}/v1", api_key="bench", max_retries=0)
    through = openai.OpenAI(base_url=f"{running.base}/v1", api_key="bench", max_retries=0, timeout=600)
    straight, gated, sent = Timings(), Timings(), []
    for number in range(3):  # connections opened, the ranker imported and its index built
        one_request(through, number, Timings())
        one_request(direct, number, Timings())
    for number in range(requests):
        one_request(direct, number, straight)
        one_request(through, number, gated)
        sent.append(httpx.get(f"{model}/bench/last", timeout=5).json())
    direct.close()
    through.close()
    return straight, gated, sent


def overhead_figures(model: str, directory: Path, requests: int) -> None:
    print(f"\n3. A chat request through the gateway, one stdio server of 20 or 1,000 tools mounted (official openai"
          f" SDK, {requests} requests of each kind; added = through the gateway minus straight to the stand-in"
          " model, request by request; the model's own read of what it was sent is in 'model reads')")
    print(f"{'tools':>5} {'budget':<19} {'sent':>5} {'tool chars':>11} {'model reads':>12} {'added p50':>10}"
          f" {'added p95':>10} {'stream 1st +p50':>16} {'stream +p50':>12} {'direct p50':>11} {'RSS':>7}")
    for tools_each in (TOOLS_PER_SERVER, 1000):
        for mode, settings in MODES.items():
            with gateway(directory, model, 1, tools_each, settings) as running:
                if running.ready != 1:
                    raise RuntimeError(f"the server of {tools_each} tools was not ready in {START_TIMEOUT:g} s")
                straight, gated, sent = measure_requests(model, running, requests)
                own = running.rss()[0]
            added = [g - s for g, s in zip(gated.plain, straight.plain, strict=True)]
            first = [g - s for g, s in zip(gated.first, straight.first, strict=True)]
            whole = [g - s for g, s in zip(gated.whole, straight.whole, strict=True)]
            tools = median([float(s["tools"]) for s in sent])
            chars = median([float(s["tools_chars"]) for s in sent])
            reads = median([float(s["read_ms"]) for s in sent])
            print(f"{running.tools:>5} {mode:<19} {tools:>5.0f} {chars:>11,.0f} {ms(reads, 9)} {ms(median(added), 7)}"
                  f" {ms(p95(added), 7)} {ms(median(first), 13)} {ms(median(whole), 9)}"
                  f" {ms(median(straight.plain), 8)} {own:>4.0f} MB", flush=True)


def gateway_figures(requests: int, setups: list[tuple[int, int]], limit: float, skip: set[str]) -> None:
    with stand_in_model() as model, tempfile.TemporaryDirectory(prefix="toolbridge-scale-") as tmp:
        if "overhead" not in skip:
            overhead_figures(model, Path(tmp), requests)
        if "startup" not in skip:
            startup_figures(model, Path(tmp), setups, limit)


# ---- figures ----------------------------------------------------------------------------------------------

def median(values: list[float]) -> float:
    return statistics.median(values)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def ms(value: float, width: int = 6) -> str:
    return f"{value:>{width}.2f} ms"


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


if __name__ == "__main__":
    main()
