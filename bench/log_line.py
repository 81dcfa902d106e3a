"""What one log line costs the gateway: CPU a `request` line (as app/api/request_log.py writes one for every HTTP
request, with a tool round's fields) in each format, and a call below the level (a debug line at the default, info).

    python -m bench.log_line [--lines 20000]

Run from a checkout to measure its `app` (a before/after: run it in each worktree). Lines go to /dev/null: what is
measured is making and rendering them, not the disk. The gateway writes one line a request and one a tool call."""

import argparse
import os
import subprocess
import sys
import time

# One process per format: structlog is configured once per process.
MEASURE = """
import os, sys, time
sys.stderr = open(os.devnull, "w")
from app.logging import configure_logging
configure_logging({log_format!r}, "info", secrets=["sk-a-configured-secret"])
import structlog
log = structlog.get_logger("toolbridge.http")
structlog.contextvars.bind_contextvars(request_id="req_0123456789abcdef")
fields = dict(method="POST", path="/v1/chat/completions", status=200, duration_ms=12.3, rounds=2,
              tools_called=["get_current_time"], tools_offered=2, tools_withheld=0, prompt_tokens=120,
              completion_tokens=30)
def timed(write, lines):
    for _ in range(lines // 10):
        write()
    started = time.process_time()
    for _ in range(lines):
        write()
    return (time.process_time() - started) / lines * 1e6
line = timed(lambda: log.info("request", **fields), {lines})
dropped = timed(lambda: log.debug("round", number=1, tools=3), {lines} * 10)
print(f"{{line:.1f}} {{dropped:.2f}}")
"""


def measure(log_format: str, lines: int) -> tuple[float, float]:
    """Microseconds of CPU a line, and a call below the level, in a fresh process."""
    script = MEASURE.format(log_format=log_format, lines=lines)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env).stdout
    line, dropped = out.split()
    return float(line), float(dropped)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per format; the best is printed")
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"{'format':10} {'a request line (us)':>20} {'a call below the level (us)':>28}")
    for log_format in ("console", "json"):
        runs = [measure(log_format, args.lines) for _ in range(args.runs)]
        print(f"{log_format:10} {min(r[0] for r in runs):20.1f} {min(r[1] for r in runs):28.2f}")
    print(f"({args.runs} processes a format, {args.lines:,} lines each; {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
