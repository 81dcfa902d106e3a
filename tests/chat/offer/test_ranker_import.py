"""The ranker's import (app/chat/offer/ranker_import.py): none while a request's tools fit, and in a worker thread,
not on the event loop, for the first request that ranks. In a fresh interpreter each: this one has imported bm25s
long ago."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[3]
# Prints, as JSON, what came of three choices on one event loop: one whose tools fit, then two at once that rank;
# and in which threads bm25s was looked for (a finder sees every import of it, whichever thread asks).
SCRIPT = """
import asyncio, json, sys, threading

searched_in = []


class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "bm25s":
            searched_in.append(threading.current_thread().name)
        return None


sys.meta_path.insert(0, Watch())
from app.chat.offer import Budget, choose_within, ranked

TOOLS = [{"type": "function", "function": {"name": f"{topic}_{n}", "description": f"Works with {topic} things.",
                                           "parameters": {"type": "object", "properties": {}}}}
         for topic in ("weather", "email", "calendar") for n in range(4)]
USER = [{"role": "user", "content": "What is the weather in Oslo?"}]
ROOMY = 1 << 40


async def main():
    fits = await ranked(lambda: choose_within(TOOLS[:2], [], USER, Budget(8, ROOMY)))
    imported_for_fits = "bm25s" in sys.modules
    first, second = await asyncio.gather(*(ranked(lambda: choose_within(TOOLS, [], USER, Budget(4, ROOMY)))
                                           for _ in range(2)))
    return {"fits": fits, "imported_for_fits": imported_for_fits, "loop": threading.current_thread().name,
            "kept": [sorted(first.kept), sorted(second.kept)]}


found = asyncio.run(main())
found["searched_in"] = searched_in
found["kept_outside_a_loop"] = sorted(choose_within(TOOLS, [], USER, Budget(4, ROOMY)).kept)
print(json.dumps(found))
"""


def _run() -> dict[str, Any]:
    result = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def test_the_ranker_is_imported_off_the_event_loop_by_the_first_choice_that_ranks_and_by_none_that_fits() -> None:
    found = _run()
    assert found["fits"] is None and found["imported_for_fits"] is False
    # Asked for by the two rankings on the loop; imported only in worker threads, never in the loop's.
    assert found["searched_in"] and found["loop"] not in found["searched_in"]
    # Both rankings were answered in full, as they are where bm25s is imported where asked for.
    weather = sorted(f"weather_{n}" for n in range(4))
    assert found["kept"] == [weather, weather] and found["kept_outside_a_loop"] == weather
