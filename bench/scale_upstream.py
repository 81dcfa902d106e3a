"""bench/upstream.py's stand-in model server, which also keeps what the last chat request brought: its size, how
many tools it offered and their definitions' characters (as compact JSON), and how long reading it took. GET
/bench/last returns that; everything else is answered as bench/upstream.py answers it.

    python -m bench.scale_upstream --port 9001
"""

import json
import time
from typing import Any

from bench import upstream

_JSON = [(b"content-type", b"application/json")]
last: dict[str, Any] = {}


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    raw = await upstream.read_body(receive)
    if scope["method"] == "GET":
        reply = json.dumps(last).encode() if scope["path"] == "/bench/last" else upstream.MODELS
        await send({"type": "http.response.start", "status": 200, "headers": _JSON})
        await send({"type": "http.response.body", "body": reply})
        return
    started = time.perf_counter()
    body = json.loads(raw)
    tools = body.get("tools") or []
    last.update(body_chars=len(raw), tools=len(tools), read_ms=(time.perf_counter() - started) * 1000,
                tools_chars=len(json.dumps(tools, separators=(",", ":"), ensure_ascii=False)) if tools else 0)
    await upstream.send_answer(send, body)


if __name__ == "__main__":
    upstream.main(app, __doc__)
