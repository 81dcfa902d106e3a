"""Runs the tasks through toolbridge, one gateway process per configuration, and tabulates the scores.

Each configuration is a set of TOOLBRIDGE_* variables; the gateway mounts the same real MCP servers for
all (server-everything and server-filesystem from tests/npm, mcp-server-time, the eval's help desk) and
talks to one upstream model server. The tasks of the category at scale (`"servers": "catalogue"`) get a gateway
of their own per configuration, with the twelve recorded servers of bench/eval/catalogue/ instead.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from app.chat.answer.trace import strip_trace
from app.settings import field_of
from bench.eval.doors import ask
from bench.eval.scoring import Score, observe, score
from bench.eval.tasks import Task, client_tools
from tests.support.servers import free_port

ROOT = Path(__file__).parent.parent.parent
NPM = ROOT / "tests" / "npm" / "node_modules" / "@modelcontextprotocol"
HELPDESK = Path(__file__).parent / "helpdesk.py"
FILES = Path(__file__).parent / "files"
CATALOGUE_SERVER = Path(__file__).parent / "catalogue_server.py"
# The recorded servers in the order they were recorded (bench/eval/record_catalogue.py), time last.
CATALOGUE = ("memory", "sequential-thinking", "playwright", "context7", "notion", "kubernetes", "firecrawl", "github",
             "tavily", "postgres", "brave-search", "time")
START_TIMEOUT = 120.0
REQUEST_TIMEOUT = 600.0
# Every value of each setting that changes what the model sees, one at a time.
VARIED = {"tool_prefix": ("always", "on-conflict"), "result_format": ("envelope", "text"),
          "system_hint": (True, False), "schema_profile": ("lmstudio", "openai", "passthrough"),
          "tool_budget": (0, 8, 16, 24, 32), "rank_client_tools": (True, False), "min_mcp_tools": (0, 4, 8, 16),
          "tool_order": ("relevance", "configured"), "tool_discovery": ("off", "find_tools")}
LABELS = {"tool_prefix": "prefix", "result_format": "result", "system_hint": "hint", "schema_profile": "schema",
          "tool_budget": "budget", "rank_client_tools": "rank-client", "min_mcp_tools": "min-mcp",
          "tool_order": "order", "tool_discovery": "discovery"}
CONFIGS: dict[str, dict[str, str]] = {
    "defaults": {},
    **{f"{LABELS[name]}={str(value).lower()}": {f"TOOLBRIDGE_{name.upper()}": str(value).lower()}
       for name, values in VARIED.items() for value in values},
    # What a naive bridge sends: bare names, schemas as the server wrote them, plain text results, no hint.
    "raw": {"TOOLBRIDGE_TOOL_PREFIX": "on-conflict", "TOOLBRIDGE_SCHEMA_PROFILE": "passthrough",
            "TOOLBRIDGE_RESULT_FORMAT": "text", "TOOLBRIDGE_SYSTEM_HINT": "false"},
}


def same_as_defaults(name: str) -> bool:
    """Whether a one-setting configuration only repeats a default (so `all` can leave it out)."""
    overrides = CONFIGS[name]
    if name in ("defaults", "raw") or len(overrides) != 1:
        return False
    [(variable, value)] = overrides.items()
    default = field_of(variable.removeprefix("TOOLBRIDGE_").lower()).default
    return str(default).lower() == value


@dataclass(frozen=True)
class Outcome:
    config: str
    task: Task
    streamed: bool
    score: Score
    seconds: float
    prompt_tokens: int = 0  # over every round of every turn, as the upstream counted them


def mcp_config(folder: Path) -> tuple[Path, str]:
    """The mcp.json every configuration mounts, and the folder the filesystem server serves (a copy of
    bench/eval/files)."""
    root = folder / "files"
    shutil.copytree(FILES, root)
    # server-everything's other tools are protocol demos (logging toggles, gzip, long runs) nobody mounts for use
    servers = {"everything": {"command": "node", "args": [str(NPM / "server-everything" / "dist" / "index.js")],
                              "enabledTools": ["echo", "get-sum"]},
               "time": {"command": "mcp-server-time"},
               "files": {"command": "node", "args": [str(NPM / "server-filesystem" / "dist" / "index.js"), str(root)]},
               "helpdesk": {"command": sys.executable, "args": [str(HELPDESK)]}}
    path = folder / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path, str(root.resolve())


def catalogue_config(folder: Path) -> Path:
    """The mcp.json of the category at scale: each recorded server under its own name, served offline by
    bench/eval/catalogue_server.py."""
    servers = {name: {"command": sys.executable, "args": [str(CATALOGUE_SERVER), name]} for name in CATALOGUE}
    path = folder / "mcp-catalogue.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


@contextmanager
def gateway(config: dict[str, str], upstream: str, mcp_json: Path, source: Path = ROOT) -> Iterator[str]:
    """A toolbridge process with `config`, run from the checkout `source`, ready with every MCP server;
    yields its base URL."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLBRIDGE_")} | config | {
        "TOOLBRIDGE_UPSTREAM_URL": upstream, "TOOLBRIDGE_MCP_CONFIG": str(mcp_json), "TOOLBRIDGE_LOG_LEVEL": "warning",
        "TOOLBRIDGE_STATE_URL": "memory://", "PYTHONPATH": str(source)}
    process = subprocess.Popen([sys.executable, "-m", "app", "--port", str(port)], env=env, cwd=source,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                servers = httpx.get(f"{base}/health", timeout=5).json().get("servers", {})
                if servers and all(s["state"] == "ready" for s in servers.values()):
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(f"the gateway did not get ready with {config}")
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=60)


def tool_names(base: str) -> dict[str, str]:
    """Exposed name -> MCP tool name, as the gateway maps them."""
    return {t["function"]["name"]: t["tool"] for t in httpx.get(f"{base}/tools", timeout=30).json()["data"]}


def run_task(
    client: httpx.Client, base: str, task: Task, streamed: bool, tool_of: dict[str, str], verbose: bool = False,
    history: str = "trace", door: str = "chat",
) -> tuple[Score, float, int]:
    """All of a task's turns, as a chat client sends them through `door` (bench/eval/doors.py); scored on the
    last turn's answer. A request the gateway answers with an error fails the task. With `history="text"` the
    client keeps only an answer's text, as clients of the default reasoning trace do."""
    messages: list[dict[str, Any]] = []
    content, client_calls, tokens = "", [], 0
    own_tools = client_tools(task.client_tools)
    started = time.perf_counter()
    try:
        for turn in task.turns:
            messages.append({"role": "user", "content": turn})
            # temperature 0: the same answer every run, so configurations are compared, not luck
            body = {"model": "eval-model", "messages": messages, "stream": streamed, "temperature": 0}
            if own_tools:
                body["tools"] = own_tools
            content, client_calls, used = ask(door, client, base, body)
            tokens += used
            # Trace blocks kept, as Open WebUI does with the details trace; or only the text.
            messages.append({"role": "assistant", "content": content if history == "trace" else strip_trace(content)})
            if client_calls:  # the client would run its own tool now; the eval stops there
                break
    except (httpx.HTTPStatusError, ValueError) as exc:
        print(f"  {task.id}: the request failed: {exc}", file=sys.stderr)
        return Score(False, False, False, False), time.perf_counter() - started, tokens
    seen = observe(content, tool_of, client_calls)
    if verbose:
        print(f"    {task.id}: calls {seen.calls}; answer {seen.answer[:200]!r}", file=sys.stderr)
    return score(task, seen), time.perf_counter() - started, tokens


def run(configs: list[str], tasks: list[Task], streams: Callable[[str], list[bool]], upstream: str, folder: Path,
        source: Path = ROOT, verbose: bool = False, history: str = "trace", doors: tuple[str, ...] = ("chat",),
        ) -> list[Outcome]:
    """Every task under each configuration, whole and/or streamed as `streams(configuration)` says, through each
    of `doors` (a door other than chat shows in the table as "configuration via door"). Each set of servers the
    tasks use gets a gateway of its own."""
    mcp_json, root = mcp_config(folder)
    sets = list(dict.fromkeys(task.servers for task in tasks))
    mounted = {"standard": mcp_json, **({"catalogue": catalogue_config(folder)} if "catalogue" in sets else {})}
    outcomes = []
    for name, servers in ((n, s) for n in configs for s in sets):
        with (gateway(CONFIGS[name], upstream, mounted[servers], source) as base,
              httpx.Client(timeout=REQUEST_TIMEOUT) as client):
            tool_of = tool_names(base)
            mine = [task for task in tasks if task.servers == servers]
            for door, task in ((d, t.in_folder(root)) for d in doors for t in mine):
                label = name if door == "chat" else f"{name} via {door}"
                for streamed in streams(name):
                    result, seconds, tokens = run_task(client, base, task, streamed, tool_of, verbose, history, door)
                    outcomes.append(Outcome(label, task, streamed, result, seconds, tokens))
                    mark = "pass" if result.passed else "FAIL"
                    print(f"  {label:<20} {task.id:<24} {'stream' if streamed else 'whole':<7}{mark} {seconds:5.1f} s",
                          file=sys.stderr)
    return outcomes


def table(outcomes: list[Outcome]) -> str:
    width = max([20, *(len(o.config) + 2 for o in outcomes)])  # "defaults via responses" is wider than the rest
    lines = [f"{'configuration':<{width}}{'mode':<8}{'passed':>9}{'tool':>8}{'args':>8}{'answer':>8}{'median s':>10}"
             f"{'prompt tokens':>15}", "-" * (width + 66)]
    for config in dict.fromkeys(o.config for o in outcomes):
        for streamed in (False, True):
            rows = [o for o in outcomes if o.config == config and o.streamed == streamed]
            if not rows:
                continue

            def share(attribute: str, rows: list[Outcome] = rows) -> str:
                return f"{sum(getattr(o.score, attribute) for o in rows)}/{len(rows)}"

            median = statistics.median(o.seconds for o in rows)
            tokens = statistics.median(o.prompt_tokens for o in rows)
            lines.append(f"{config:<{width}}{'stream' if streamed else 'whole':<8}{share('passed'):>9}"
                         f"{share('tool_ok'):>8}{share('arguments_ok'):>8}{share('answer_ok'):>8}{median:>10.2f}"
                         + (f"{tokens:>15.0f}" if tokens else f"{'-':>15}"))  # no usage reported
    return "\n".join(lines)


def by_category(outcomes: list[Outcome]) -> str:
    """Tasks passed per category (columns) and configuration (rows), streamed and whole together."""
    configs = list(dict.fromkeys(o.config for o in outcomes))
    categories = list(dict.fromkeys(o.task.category for o in outcomes))
    lines = ["| configuration | " + " | ".join(categories) + " |", "|---" * (len(categories) + 1) + "|"]
    for config in configs:
        cells = []
        for category in categories:
            rows = [o for o in outcomes if o.config == config and o.task.category == category]
            cells.append(f"{sum(o.score.passed for o in rows)}/{len(rows)}")
        lines.append(f"| {config} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
