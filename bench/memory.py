"""What conversation memory costs a request: restoring a history of N turns, each of which ran one MCP
tool, from the default SQLite store (and from memory:// for comparison), and remembering a turn; each store
bare and sealed as the gateway opens it (app/state/seal.py: keyed names, AES-GCM values), so the seal's cost shows.

    .venv/bin/python -m bench.memory [--turns 1,10,50] [--repeats 200]
"""

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from app.chat.memory.conversation import ConversationMemory, MemoryStores
from app.openai.result_format import RenderOptions
from app.state import Bounds, MemoryStore, SealedStore, StateStore
from app.state.sqlite import SqliteStore

BOUNDS = Bounds(max_bytes=200 * 1024 * 1024, max_age_seconds=30 * 86_400)
SECRET = os.urandom(32)  # what the seal's keys are derived from (a Fernet key's bytes, in the gateway)
RESULT = '{"status":"success","data":{"timezone":"UTC","datetime":"2026-11-23T16:10:08+00:00"}}'


def turn(number: int) -> tuple[list[dict[str, Any]], str]:
    call = {"id": f"call-{number}", "type": "function",
            "function": {"name": "get_current_time", "arguments": '{"timezone": "UTC"}'}}
    rounds = [{"role": "assistant", "content": "", "tool_calls": [call]},
              {"role": "tool", "tool_call_id": f"call-{number}", "content": RESULT}]
    return rounds, f"It is {number}:00 in UTC, a fine hour for turn {number} of this conversation."


async def measure(store: StateStore, turns: int, repeats: int) -> tuple[float, float]:
    """Median microseconds to restore a history of `turns` remembered turns, and to remember one."""
    rendering = RenderOptions()
    history: list[dict[str, Any]] = []
    remember_times = []
    for number in range(turns):
        history.append({"role": "user", "content": f"What time is it? ({number})"})
        memory = ConversationMemory(MemoryStores(store, store), rendering)
        await memory.restore(history)
        rounds, answer = turn(number)
        started = time.perf_counter()
        await memory.remember_turn(rounds, answer, answer)
        remember_times.append(time.perf_counter() - started)
        history.append({"role": "assistant", "content": answer})
    history.append({"role": "user", "content": "And now?"})
    restore_times = []
    for _ in range(repeats):
        memory = ConversationMemory(MemoryStores(store, store), rendering)
        started = time.perf_counter()
        restored = await memory.restore(history)
        restore_times.append(time.perf_counter() - started)
    assert restored.turns == turns, "every turn should come back"
    return statistics.median(restore_times) * 1e6, statistics.median(remember_times) * 1e6


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", default="1,10,50")
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    print(f"{'store':12} {'turns':>5} {'restore p50':>12} {'remember p50':>13}")
    for count in (int(n) for n in args.turns.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            async with SqliteStore(Path(tmp) / "state.db", BOUNDS) as sqlite:
                for bare in (sqlite, MemoryStore(BOUNDS)):
                    for store, label in ((bare, bare.kind), (SealedStore(bare, SECRET), f"{bare.kind}+seal")):
                        restore, remember = await measure(store, count, args.repeats)
                        print(f"{label:12} {count:>5} {restore:>10.0f} µs {remember:>10.0f} µs")


if __name__ == "__main__":
    anyio.run(main)
