"""The ranker (bm25s, and numpy beneath it) imported when a request first ranks, off the event loop.

It costs about 12 MB of memory, which a gateway whose requests all fit their tool budget never needs: imported at
start whenever a budget was set (the default), it was most of what the idle gateway grew by, 100 MB to 120 (issue
47). Imported on the event loop by the first ranked request, it held every other request (and /health) for
0.15-0.3 s. A catalogue past the budget's count has its ranking data worked out, bm25s with it, in the pool's worker
thread when it is built (tool_ranking.py), and a chat that must work data out does it in a worker thread
(loop_options.py). What ranks on the loop (`GET`/`POST /tools`) runs through `ranked`: if it needs bm25s before
bm25s is imported, it stops there, having done nothing (`_Deferred`), the import runs in a worker thread while the
loop serves the others, and it runs again.
"""

import logging
from collections.abc import Callable
from contextvars import ContextVar
from types import ModuleType
from typing import TypeVar

import anyio.to_thread

T = TypeVar("T")

_imported: list[ModuleType] = []  # bm25s, once its import has finished and its logger is put back
# Set while `ranked` runs a choice: bm25s asked for before its import stops the choice instead of importing it on
# the loop. Anywhere else (a thread, a script, a test) bm25s is imported where it is asked for.
_DEFER: ContextVar[bool] = ContextVar("toolbridge_defer_ranker_import", default=False)


class _Deferred(Exception):
    """A choice run by `ranked` asked for bm25s before its import."""


def bm25s_module() -> ModuleType:
    """bm25s, imported now unless `ranked` is running the caller (which then imports it off the loop). Importing it
    sets its logger to DEBUG, which would log a line per ranked request: put back."""
    if _imported:
        return _imported[0]
    if _DEFER.get():
        raise _Deferred
    import bm25s

    logging.getLogger("bm25s").setLevel(max(logging.WARNING, logging.getLogger().level))
    module: ModuleType = bm25s
    _imported[:] = [module]
    return module


async def ranked(choose: Callable[[], T]) -> T:
    """`choose()`, a pure choice that may rank (its result depends on its arguments alone, so running it twice
    changes nothing), with bm25s imported in a worker thread if it asks for it first."""
    if _imported:
        return choose()
    deferring = _DEFER.set(True)
    try:
        return choose()
    except _Deferred:
        pass
    finally:
        _DEFER.reset(deferring)
    await anyio.to_thread.run_sync(bm25s_module)
    return choose()
