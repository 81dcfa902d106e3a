"""Which of app/'s modules one streamed chat with one MCP tool round runs, and how it moves between them.

    python -m bench.module_trace [--source DIR] [--list] [--top N]

The chat: `POST /v1/chat/completions` with `stream: true` through the real app (`create_app`, its lifespan, a
starlette `TestClient`), the real stdio MCP server `tests/support/mcp_servers/basic.py`, and an
`httpx.MockTransport` upstream that streams one call of `basic__echo`, then, given the tool's result, an
answer. Settings as the suite's (`tool_prefix=always`, SQLite memory in a temporary directory, no tool budget),
the rest at their defaults. `--source DIR` runs another checkout's app/ (its tree first on sys.path), for
before and after; this script, its upstream and the MCP server stay this checkout's.

What is traced: only the request, from just before the POST until its stream has been read to the end (the
lifespan's start, the MCP server's start-up and the shutdown are outside the window), in every thread
(`sys.setprofile` and `threading.setprofile`, CPython 3.11; `--source` must run on the same interpreter).
A module is an `app/` file, named by its path under `app/` (`chat/questions.py`). What counts:

- *Modules entered*: app/ modules any of whose Python functions ran in the window (a call or a resumption).
- *Calls*: profile `call` events of a fresh activation (a function starting, not a generator or coroutine
  resuming: the frame is at `RESUME 0`) whose callee's code and whose *immediate* caller's code (`f_back`)
  are both in app/. A function app/ reaches only through a library (a route called by FastAPI, a task started
  by asyncio) has no app/ caller and is not a call here; one called through a C function (pydantic calling a
  validator) is, since C functions have no frame. *Cross-module calls* are those whose two modules differ;
  an *edge* is a distinct (caller module, callee module) pair of them.
- *Resumptions* (a generator, async generator or coroutine continuing after a yield or an await) are not
  calls: the route pulling the answer's stream chunk by chunk, or the event loop waking a task, adds no call
  and no edge. They are counted apart: *cross-module resumptions*, where the resumer's nearest app/ frame is in
  another module than the generator (the consumer pulling a producer).
- *Calls into app/api/ from lower packages*: calls whose callee is in `api/` and whose caller is in app/ but
  neither in `api/` nor above it (`main.py`, `cli.py`, `__main__.py`).
- *Alternation*: per context (a thread, and within it the asyncio task running, or none), the sequence of
  app/ modules the execution is in, one entry per change of module: a fresh call moves it to the callee's
  module, the return moves it back to the nearest app/ frame below (library frames are transparent: app A
  calling a library that calls app B moves A -> B). A resumption or a yield that crosses modules *ends* the
  sequence's current run (a break): a consumer pulling a generator in another module, item by item, is
  not alternation; one staying in a module (a generator expression) is transparent. An alternation is a run of
  consecutive entries that takes exactly two modules in turn, A B A B ...; its count is the number of moves in
  it (entries - 1): a call and its return, A -> B -> A, is 2; A -> B -> A -> B is 3; an orchestrator in A
  calling two functions of B one after the other is A B A B A, 4. The figure is the longest run over all
  contexts, with its pair; the top pairs are ranked by their longest run.

Determinism: the app/ code of one request is the same run to run, but the contexts are split by asyncio
task, and what runs inside the window besides the request (a background task waking: the MCP session's
reader, a keep-alive, the upstream's watch) depends on timing, so a module or an edge can come and go between
runs. `--runs N` runs the chat N times in N fresh apps and prints which figures differ.
"""

import argparse
import asyncio
import dis
import json
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

HERE = Path(__file__).resolve().parent.parent
BASIC_SERVER = HERE / "tests" / "support" / "mcp_servers" / "basic.py"
UPSTREAM_URL = "http://upstream.test/v1"
TOOL = "basic__echo"
# Seconds between the server's being ready and the chat: a 2026-era server answers the gateway's
# subscriptions/listen with a notice per list, and the gateway relists prompts and resources (mcp/offer.py,
# mcp/watching.py); inside the window, that start-up work ran 8 more modules and a 48-move alternation.
SETTLE = 1.0
ABOVE_API = frozenset({"main.py", "cli.py", "__main__.py"})

_RESUME = dis.opmap["RESUME"]
_YIELD = dis.opmap["YIELD_VALUE"]
_GENERATOR_FLAGS = 0x20 | 0x80 | 0x100 | 0x200  # CO_GENERATOR, CO_COROUTINE, CO_ITERABLE_COROUTINE, CO_ASYNC_GENERATOR

Break = None  # in a sequence: a resumption or a yield crossed modules; a run never spans it
Pair = tuple[str, str]


# ---------------------------------------------------------------- the counts, pure


@dataclass(frozen=True)
class Run:
    """A run of alternation: `moves` moves between the two modules of `pair` (sorted), one after another."""

    pair: Pair
    moves: int


def alternation_runs(sequence: Sequence[str | None]) -> list[Run]:
    """Every maximal run of `sequence` that alternates between exactly two modules, as A B A B ... (repeats of
    one module in a row are one entry; `None` is a break). Runs of one move (A B) are included."""
    entries: list[str | None] = []
    for item in sequence:
        if not entries or item != entries[-1] or item is None:
            entries.append(item)
    runs: list[Run] = []
    start = 0
    for i in range(1, len(entries) + 1):
        if _continues(entries, start, i):
            continue
        if entries[start] is not None and i - 1 > start:
            runs.append(Run(tuple(sorted((entries[start], entries[start + 1]))), i - 1 - start))  # type: ignore[arg-type]
        # the next run begins with the last two entries of this one (A B A C: B A is not, A C is)
        start = i - 1 if i < len(entries) and entries[i - 1] is not None and entries[i] is not None else i
    return runs


def _continues(entries: list[str | None], start: int, i: int) -> bool:
    if i >= len(entries) or entries[i] is None or entries[start] is None:
        return False
    if i == start + 1:
        return True
    return entries[i] == entries[i - 2]


def longest_alternation(sequences: Iterable[Sequence[str | None]]) -> Run | None:
    """The longest run of alternation over all sequences; ties go to the pair that sorts first."""
    runs = [run for sequence in sequences for run in alternation_runs(sequence)]
    return min(runs, key=lambda run: (-run.moves, run.pair), default=None)


def top_pairs(sequences: Iterable[Sequence[str | None]], n: int) -> list[Run]:
    """Each pair's longest run, longest first."""
    best: dict[Pair, int] = {}
    for sequence in sequences:
        for run in alternation_runs(sequence):
            best[run.pair] = max(best.get(run.pair, 0), run.moves)
    return [Run(pair, moves) for pair, moves in sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


def is_lower(module: str) -> bool:
    """A module below the HTTP layer: in app/ but neither in api/ nor above it, nor a door's routes (which the import
    contracts count as the HTTP layer: `app.doors.*.routes`)."""
    in_http_layer = module.startswith("doors/") and module.endswith("/routes.py")
    return not module.startswith("api/") and module not in ABOVE_API and not in_http_layer


def calls_into_api_from_below(calls: Counter[Pair]) -> int:
    return sum(n for (caller, callee), n in calls.items() if callee.startswith("api/") and is_lower(caller))


# ---------------------------------------------------------------- the tracer


@dataclass
class Trace:
    entered: set[str] = field(default_factory=set)
    calls: Counter[Pair] = field(default_factory=Counter)  # cross-module calls, by edge
    resumptions: Counter[Pair] = field(default_factory=Counter)  # cross-module resumptions, resumer -> generator
    sequences: dict[Any, list[str | None]] = field(default_factory=dict)


class ModuleTracer:
    """A profile function that records a `Trace` of the app/ modules under `root` while `recording`."""

    def __init__(self, root: Path) -> None:
        self.prefix = str(root) + "/"
        self.trace = Trace()
        self.recording = False
        self._modules: dict[str, str | None] = {}
        self._resumed: set[int] = set()  # frames whose current activation is a resumption

    def module(self, frame: FrameType | None) -> str | None:
        if frame is None:
            return None
        filename = frame.f_code.co_filename
        try:
            return self._modules[filename]
        except KeyError:
            name = filename[len(self.prefix):] if filename.startswith(self.prefix) else None
            self._modules[filename] = name
            return name

    def nearest(self, frame: FrameType | None) -> str | None:
        """The module of the nearest app/ frame at or below `frame`."""
        while frame is not None:
            name = self.module(frame)
            if name is not None:
                return name
            frame = frame.f_back
        return None

    def _sequence(self) -> list[str | None]:
        try:
            task = asyncio.current_task() if asyncio._get_running_loop() is not None else None
        except RuntimeError:
            task = None
        key = (threading.get_ident(), task)  # the task itself, not its id: an id is reused once a task is gone
        return self.trace.sequences.setdefault(key, [])

    def _move(self, source: str | None, target: str | None) -> None:
        sequence = self._sequence()
        for name in (source, target):
            if name is not None and (not sequence or sequence[-1] != name):
                sequence.append(name)

    def _break(self) -> None:
        sequence = self._sequence()
        if sequence and sequence[-1] is not Break:
            sequence.append(Break)

    def __call__(self, frame: FrameType, event: str, arg: object) -> None:
        if not self.recording or event not in ("call", "return"):
            return
        name = self.module(frame)
        if name is None:
            return
        code = frame.f_code
        if event == "call":
            self.trace.entered.add(name)
            fresh = code.co_code[frame.f_lasti] == _RESUME and code.co_code[frame.f_lasti + 1] == 0
            below = self.nearest(frame.f_back)
            if not fresh:
                self._resumed.add(id(frame))
                if below != name:
                    self._break()
                    if below is not None:
                        self.trace.resumptions[(below, name)] += 1
                return
            caller = self.module(frame.f_back)
            if caller is not None and caller != name:
                self.trace.calls[(caller, name)] += 1
            self._move(below, name)
            return
        below = self.nearest(frame.f_back)
        suspended = bool(code.co_flags & _GENERATOR_FLAGS) and code.co_code[frame.f_lasti] == _YIELD
        resumed = id(frame) in self._resumed
        if not suspended:
            self._resumed.discard(id(frame))
        if suspended or resumed:
            if below != name:
                self._break()
            return
        self._move(name, below)


# ---------------------------------------------------------------- the chat


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {"id": "chatcmpl-trace", "object": "chat.completion.chunk", "created": 1700000000, "model": "trace",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


def upstream_handler(requests: list[dict[str, Any]]) -> Callable[[Any], Any]:
    """The upstream: asked with the echo tool offered, it streams one call of it; after the result, an answer."""
    import httpx

    def handle(request: httpx.Request) -> httpx.Response:
        if not request.url.path.endswith("/chat/completions"):
            if request.url.path.endswith("/v1/models"):
                return httpx.Response(200, json={"object": "list", "data": [{"id": "trace", "object": "model"}]})
            return httpx.Response(404, json={"error": {"message": "not here"}})
        body = json.loads(request.content)
        requests.append(body)
        last = body["messages"][-1]
        if last.get("role") == "tool":
            parts = [_chunk({"role": "assistant", "content": "The tool said: "}),
                     _chunk({"content": str(last.get("content"))[:80]}), _chunk({}, "stop")]
        else:
            call = {"index": 0, "id": "call_1", "type": "function",
                    "function": {"name": TOOL, "arguments": '{"text": "hello"}'}}
            parts = [_chunk({"role": "assistant", "content": None, "tool_calls": [call]}), _chunk({}, "tool_calls")]
        return httpx.Response(200, content=b"".join([*parts, b"data: [DONE]\n\n"]),
                              headers={"content-type": "text/event-stream"})

    return handle


def traced_chat(tmp: Path, settle: float = SETTLE) -> tuple[Trace, str, int]:
    """One streamed chat with one tool round, traced; the trace, the streamed text and the upstream's requests."""
    import httpx
    from starlette.testclient import TestClient

    import app
    from app.main import create_app
    from app.settings import Settings

    config = tmp / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"basic": {"command": sys.executable, "args": [str(BASIC_SERVER)]}}}))
    settings = Settings.load(_env_file=None, mcp_config=config, upstream_url=UPSTREAM_URL,
                             mcp_connect_timeout=120, tool_timeout=20, tool_prefix="always",
                             state_url=f"sqlite:///{tmp / 'state.db'}", tool_budget=0)
    requests: list[dict[str, Any]] = []
    gateway = create_app(settings, upstream_transport=httpx.MockTransport(upstream_handler(requests)))
    tracer = ModuleTracer(Path(app.__file__).resolve().parent)
    threading.setprofile(tracer)
    sys.setprofile(tracer)
    try:
        with TestClient(gateway, base_url="http://localhost") as client:
            _wait_for_the_server(client)
            time.sleep(settle)  # the server's first list notices (prompts, resources) are relisted before the window
            body = {"model": "trace", "stream": True, "messages": [{"role": "user", "content": "echo hello"}]}
            tracer.recording = True
            with client.stream("POST", "/v1/chat/completions", json=body) as response:
                text = "".join(response.iter_text())
            tracer.recording = False
    finally:
        tracer.recording = False
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    return tracer.trace, text, len(requests)


def _wait_for_the_server(client: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = client.get("/health").json().get("servers", {}).get("basic", {}).get("state")
        if state == "ready":
            return
        time.sleep(0.05)
    raise SystemExit("the basic MCP server never became ready")


# ---------------------------------------------------------------- the report


def figures(trace: Trace) -> dict[str, Any]:
    sequences = list(trace.sequences.values())
    longest = longest_alternation(sequences)
    return {
        "modules": len(trace.entered),
        "edges": len(trace.calls),
        "cross-module calls": sum(trace.calls.values()),
        "calls into api/ from below": calls_into_api_from_below(trace.calls),
        "cross-module resumptions": sum(trace.resumptions.values()),
        "longest alternation": (longest.moves, longest.pair) if longest else (0, None),
    }


def report(trace: Trace, app_root: Path, top: int, show_list: bool) -> None:
    total = len([p for p in app_root.rglob("*.py")])
    sequences = list(trace.sequences.values())
    numbers = figures(trace)
    print(f"app/ modules entered: {numbers['modules']} of {total}")
    if show_list:
        for name in sorted(trace.entered):
            print(f"  {name}")
    print(f"distinct module->module edges: {numbers['edges']}")
    print(f"cross-module calls: {numbers['cross-module calls']}")
    print(f"calls from lower packages into app/api/: {numbers['calls into api/ from below']}")
    print(f"cross-module resumptions (not calls): {numbers['cross-module resumptions']}")
    moves, pair = numbers["longest alternation"]
    print(f"longest alternation: {moves} moves, {' <-> '.join(pair) if pair else '-'}")
    print(f"contexts (thread, task) with app/ code: {sum(1 for s in sequences if any(s))}")
    print("top alternating pairs (longest run, moves):")
    for run in top_pairs(sequences, top):
        print(f"  {run.moves:3d}  {run.pair[0]} <-> {run.pair[1]}")
    print("top edges (calls):")
    for (caller, callee), n in trace.calls.most_common(top):
        print(f"  {n:4d}  {caller} -> {callee}")
    print("top resumptions (resumer -> generator):")
    for (resumer, generator), n in trace.resumptions.most_common(top):
        print(f"  {n:4d}  {resumer} -> {generator}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, help="a checkout whose app/ is traced instead of this one's")
    parser.add_argument("--list", action="store_true", help="list the modules entered")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--settle", type=float, default=SETTLE, help="seconds from ready to the chat")
    parser.add_argument("--runs", type=int, default=1, help="run the chat N times and say which figures differ")
    args = parser.parse_args(argv)
    if args.source:
        sys.path.insert(0, str(args.source.resolve()))
        sys.modules.pop("app", None)
    import app

    app_root = Path(app.__file__).resolve().parent
    print(f"app/ from {app_root.parent}")
    results = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            trace, text, upstream_requests = traced_chat(Path(tmp), args.settle)
        if upstream_requests != 2 or "echo: hello" not in text:
            raise SystemExit(f"the chat did not make one tool round ({upstream_requests} upstream requests): {text}")
        results.append(trace)
    report(results[0], app_root, args.top, args.list)
    if args.runs > 1:
        first = figures(results[0])
        for i, trace in enumerate(results[1:], 2):
            other = figures(trace)
            differ = {k: (first[k], other[k]) for k in first if first[k] != other[k]}
            extra = sorted(trace.entered ^ results[0].entered)
            print(f"run {i}: {differ if differ else 'same figures'}{f'; modules differ: {extra}' if extra else ''}")


if __name__ == "__main__":
    main()
