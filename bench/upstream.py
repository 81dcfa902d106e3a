"""A raw-ASGI stand-in for an OpenAI-compatible server that is never the bottleneck of a benchmark.

Every answer is built once and cached as bytes; a request costs one JSON parse. `max_tokens` sets how
many content chunks a streamed answer has (50 when absent). Offered a `*get_current_time` tool and asked
the time, it calls the tool; after a tool result it answers. Streams are sent a chunk per write, as LM
Studio sends a token per event.

    python -m bench.upstream --port 9001
"""

import argparse
import json
from functools import cache
from typing import Any

import uvicorn

WORDS_IN_ANSWER = 40
DEFAULT_CHUNKS = 50
_JSON_HEAD = [(b"content-type", b"application/json")]
_SSE_HEAD = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


def _completion(message: dict[str, Any], finish_reason: str) -> bytes:
    return json.dumps({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": 1700000000, "model": "bench",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 20, "completion_tokens": WORDS_IN_ANSWER, "total_tokens": 20 + WORDS_IN_ANSWER},
    }).encode()


def _chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
    body = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1700000000, "model": "bench",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


ANSWER = _completion({"role": "assistant", "content": " ".join(["word"] * WORDS_IN_ANSWER)}, "stop")
MODELS = json.dumps({"object": "list", "data": [{"id": "bench", "object": "model", "owned_by": "bench"}]}).encode()


@cache
def _stream(chunks: int) -> list[bytes]:
    return [
        _chunk({"role": "assistant", "content": ""}),
        *[_chunk({"content": " word" if i else "word"}) for i in range(chunks)],
        _chunk({}, "stop"),
        b"data: [DONE]\n\n",
    ]


@cache
def _tool_call(tool: str, stream: bool) -> list[bytes]:
    call = {"id": "call_1", "type": "function", "function": {"name": tool, "arguments": '{"timezone":"UTC"}'}}
    if not stream:
        return [_completion({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls")]
    return [_chunk({"role": "assistant", "content": None, "tool_calls": [{"index": 0, **call}]}),
            _chunk({}, "tool_calls"), b"data: [DONE]\n\n"]


def _after_tool(result: str, stream: bool) -> list[bytes]:
    text = f"The tool said: {result[:200]}"
    if not stream:
        return [_completion({"role": "assistant", "content": text}, "stop")]
    return [_chunk({"role": "assistant", "content": text}), _chunk({}, "stop"), b"data: [DONE]\n\n"]


def answer(body: dict[str, Any]) -> tuple[bool, list[bytes]]:
    """Whether the answer is a stream, and its parts."""
    stream = bool(body.get("stream"))
    messages = body.get("messages") or [{}]
    last = messages[-1]
    if last.get("role") == "tool":
        return stream, _after_tool(str(last.get("content")), stream)
    tool = next((t["function"]["name"] for t in body.get("tools") or []
                 if t.get("function", {}).get("name", "").endswith("get_current_time")), None)
    if tool and body.get("tool_choice") != "none" and "time" in str(last.get("content")):
        return stream, _tool_call(tool, stream)
    if stream:
        return True, _stream(int(body.get("max_tokens") or DEFAULT_CHUNKS))
    return False, [ANSWER]


async def read_body(receive: Any) -> bytes:
    """A raw ASGI request's whole body."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = await read_body(receive)
    if scope["method"] == "GET":
        await send({"type": "http.response.start", "status": 200, "headers": _JSON_HEAD})
        await send({"type": "http.response.body", "body": MODELS})
        return
    await send_answer(send, json.loads(body))


async def send_answer(send: Any, body: dict[str, Any]) -> None:
    """The answer to a chat request, whole or as its stream's chunks."""
    stream, parts = answer(body)
    await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEAD if stream else _JSON_HEAD})
    for part in parts[:-1]:
        await send({"type": "http.response.body", "body": part, "more_body": True})
    await send({"type": "http.response.body", "body": parts[-1]})


def main(served: Any = app, description: str = __doc__) -> None:
    parser = argparse.ArgumentParser(description=description.splitlines()[0])
    parser.add_argument("--port", type=int, default=9001)
    args = parser.parse_args()
    uvicorn.run(served, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
