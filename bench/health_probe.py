"""Asks a gateway's /health every 10 ms, one request after another, until its stdin closes; then prints the
slowest answer's seconds. A process of its own (bench/hostile_inputs.py starts it), so that what it measures is the
gateway alone: a prober thread beside the benchmark's stand-in model waited on its GIL too, while the model parsed
a 40 MB body.

    .venv/bin/python -m bench.health_probe http://127.0.0.1:8000
"""

import sys
import threading
import time

import httpx

EVERY = 0.01


def main() -> None:
    base = sys.argv[1]
    closed = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), closed.set()), daemon=True).start()
    slowest = 0.0
    with httpx.Client(timeout=600) as client:
        client.get(f"{base}/health")  # connected before the first figure
        print("ready", flush=True)
        while not closed.is_set():
            started = time.monotonic()
            client.get(f"{base}/health")
            slowest = max(slowest, time.monotonic() - started)
            closed.wait(EVERY)
    print(slowest, flush=True)


if __name__ == "__main__":
    main()
