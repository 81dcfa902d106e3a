"""Runs the tasks through toolbridge, one gateway process per configuration, and tabulates the scores.

Each configuration is a set of TOOLBRIDGE_* variables; the gateway mounts the same real MCP servers for
all (server-everything from tests/npm, mcp-server-time) and talks to one upstream model server.
"""

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.eval.scoring import Score, observe, score
from bench.eval.tasks import Task
from tests.support.servers import free_port

ROOT = Path(__file__).parent.parent.parent
EVERYTHING = ROOT / "tests" / "npm" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist"
START_TIMEOUT = 120.0
REQUEST_TIMEOUT = 600.0
CONFIGS: dict[str, dict[str, str]] = {
    "defaults": {},
    "prefix=on-conflict": {"TOOLBRIDGE_TOOL_PREFIX": "on-conflict"},
    "result=text": {"TOOLBRIDGE_RESULT_FORMAT": "text"},
    "hint=off": {"TOOLBRIDGE_SYSTEM_HINT": "false"},
    "schema=openai": {"TOOLBRIDGE_SCHEMA_PROFILE": "openai"},
    "schema=passthrough": {"TOOLBRIDGE_SCHEMA_PROFILE": "passthrough"},
    # What a naive bridge sends: bare names, schemas as the server wrote them, plain text results, no hint.
    "raw": {"TOOLBRIDGE_TOOL_PREFIX": "on-conflict", "TOOLBRIDGE_SCHEMA_PROFILE": "passthrough",
            "TOOLBRIDGE_RESULT_FORMAT": "text", "TOOLBRIDGE_SYSTEM_HINT": "false"},
}


@dataclass(frozen=True)
class Outcome:
    config: str
    task: Task
    streamed: bool
    score: Score
    seconds: float


def mcp_config(folder: Path) -> Path:
    path = folder / "mcp.json"
    servers = {"everything": {"command": "node", "args": [str(EVERYTHING / "index.js")]},
               "time": {"command": "mcp-server-time"}}
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


@contextmanager
def gateway(config: dict[str, str], upstream: str, mcp_json: Path) -> Iterator[str]:
    """A toolbridge process with `config`, ready with every MCP server; yields its base URL."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLBRIDGE_")} | config | {
        "TOOLBRIDGE_UPSTREAM_URL": upstream, "TOOLBRIDGE_MCP_CONFIG": str(mcp_json), "TOOLBRIDGE_LOG_LEVEL": "warning"}
    process = subprocess.Popen([str(Path(sys.executable).parent / "toolbridge"), "--port", str(port)], env=env,
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
    client: httpx.Client, base: str, task: Task, streamed: bool, tool_of: dict[str, str]
) -> tuple[Score, float]:
    """All of a task's turns, as a chat client sends them; scored on the last turn's answer. A request the
    gateway answers with an error fails the task."""
    messages: list[dict[str, Any]] = []
    content = ""
    started = time.perf_counter()
    try:
        for turn in task.turns:
            messages.append({"role": "user", "content": turn})
            # temperature 0: the same answer every run, so configurations are compared, not luck
            body = {"model": "eval-model", "messages": messages, "stream": streamed, "temperature": 0}
            content = _ask(client, base, body)
            messages.append({"role": "assistant", "content": content})  # trace blocks kept, as Open WebUI does
    except (httpx.HTTPStatusError, ValueError) as exc:
        print(f"  {task.id}: the request failed: {exc}", file=sys.stderr)
        return Score(False, False, False, False), time.perf_counter() - started
    return score(task, observe(content, tool_of)), time.perf_counter() - started


def run(configs: list[str], tasks: list[Task], streams: list[bool], upstream: str, folder: Path) -> list[Outcome]:
    mcp_json = mcp_config(folder)
    outcomes = []
    for name in configs:
        with gateway(CONFIGS[name], upstream, mcp_json) as base, httpx.Client(timeout=REQUEST_TIMEOUT) as client:
            tool_of = tool_names(base)
            for task in tasks:
                for streamed in streams:
                    result, seconds = run_task(client, base, task, streamed, tool_of)
                    outcomes.append(Outcome(name, task, streamed, result, seconds))
                    mark = "pass" if result.passed else "FAIL"
                    print(f"  {name:<20} {task.id:<18} {'stream' if streamed else 'whole':<7}{mark} {seconds:5.1f} s",
                          file=sys.stderr)
    return outcomes


def table(outcomes: list[Outcome]) -> str:
    lines = [f"{'configuration':<20}{'mode':<8}{'passed':>9}{'tool':>8}{'args':>8}{'answer':>8}{'median s':>10}",
             "-" * 71]
    for config in dict.fromkeys(o.config for o in outcomes):
        for streamed in (False, True):
            rows = [o for o in outcomes if o.config == config and o.streamed == streamed]
            if not rows:
                continue

            def share(attribute: str, rows: list[Outcome] = rows) -> str:
                return f"{sum(getattr(o.score, attribute) for o in rows)}/{len(rows)}"

            median = statistics.median(o.seconds for o in rows)
            lines.append(f"{config:<20}{'stream' if streamed else 'whole':<8}{share('passed'):>9}"
                         f"{share('tool_ok'):>8}{share('arguments_ok'):>8}{share('answer_ok'):>8}{median:>10.2f}")
    return "\n".join(lines)


def _ask(client: httpx.Client, base: str, body: dict[str, Any]) -> str:
    headers = {"X-Toolbridge-Trace": "details"}
    if not body["stream"]:
        response = client.post(f"{base}/v1/chat/completions", json=body, headers=headers)
        response.raise_for_status()
        return response.json()["choices"][0]["message"]["content"] or ""
    parts = []
    with client.stream("POST", f"{base}/v1/chat/completions", json=body, headers=headers) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line[6:])
                if "error" in chunk:  # an error after the stream began
                    raise ValueError(chunk["error"].get("message"))
                for choice in chunk.get("choices") or []:
                    parts.append((choice.get("delta") or {}).get("content") or "")
    return "".join(parts)
