"""A scripted OpenAI-compatible upstream that streams the way LM Studio does.

Each chat request takes the next scripted reply. A reply is a `Turn` or a function of the request
body returning one. Streaming mimics LM Studio: numeric-string call ids only on a call's first delta,
`name: ""` on continuation deltas, arguments cut into small fragments, several calls in one turn,
reasoning deltas before content. Every request is recorded for assertions.
"""

import inspect
import json
import threading
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

MODEL = "qwen3-8b"
VISION_MODEL = "gemma-3-12b"
FRAGMENT = 5


@dataclass
class Call:
    name: str
    arguments: dict[str, Any] | str


@dataclass
class Turn:
    content: str = ""
    calls: list[Call] = field(default_factory=list)
    reasoning: str = ""
    usage: tuple[int, int] = (10, 5)
    status: int = 200
    error: str = ""
    # The stream pauses after its first content piece until the test sets this (bounded).
    hold_after_first_content: threading.Event | None = None
    # Set when the held stream ends, released or cut off by the gateway closing the connection.
    closed: threading.Event | None = None
    # No answer at all (no status, no byte) until the test sets this (bounded), as a model still reading a long
    # prompt or writing a whole answer; `closed` is set when the gateway hangs up meanwhile, or on release.
    hold_before_answer: threading.Event | None = None
    # A recorded stream, played as is: each item is one `data:` payload (dicts are JSON-encoded).
    raw: list[dict[str, Any] | str] | None = None
    done: bool = True
    # With an error status: the response's headers, and a body sent as is instead of the OpenAI envelope.
    headers: dict[str, str] = field(default_factory=dict)
    raw_body: str | None = None


# A turn, or a function of the request that makes one (async when it must wait for something).
Reply = Turn | Callable[[dict[str, Any]], Turn] | Callable[[dict[str, Any]], Awaitable[Turn]]


class FakeUpstream:
    def __init__(self, default: Callable[[dict[str, Any]], Turn] | None = None, record: bool = True) -> None:
        self.default = default
        self.record = record
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.queries: list[str] = []
        self.headers: list[dict[str, str]] = []
        self._replies: deque[Reply] = deque()
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/v1/models", self.models, methods=["GET"]),
                Route("/v1/embeddings", self.embeddings, methods=["POST"]),
                Route("/v1/completions", self.completions, methods=["POST"]),
                Route("/api/v1/models", self.lmstudio_models, methods=["GET"]),
            ]
        )

    def script(self, *replies: Reply) -> None:
        self._replies.clear()
        self._replies.extend(replies)
        self.requests.clear()
        self.paths.clear()
        self.queries.clear()
        self.headers.clear()

    def chat_requests(self) -> list[dict[str, Any]]:
        return [r for r, p in zip(self.requests, self.paths, strict=True) if p == "/v1/chat/completions"]

    async def _record(self, request: Request) -> dict[str, Any]:
        body = await request.json() if await request.body() else {}
        if self.record:
            self.requests.append(body)
            self.paths.append(request.url.path)
            self.queries.append(request.url.query)
            self.headers.append(dict(request.headers))
        return body

    async def chat(self, request: Request) -> Response:
        body = await self._record(request)
        if not self._replies and self.default is None:
            return JSONResponse({"error": {"message": "fake upstream: no scripted reply left"}}, 500)
        reply = self._replies.popleft() if self._replies else self.default
        assert reply is not None
        turn = reply(body) if callable(reply) else reply
        if inspect.isawaitable(turn):
            turn = await turn
        if turn.hold_before_answer is not None:
            await _held(request, turn.hold_before_answer, turn.closed)
        if turn.status != 200 and turn.raw_body is not None:
            return Response(turn.raw_body, turn.status, headers=turn.headers, media_type="text/html")
        if turn.status != 200:
            return JSONResponse(
                {"error": {"message": turn.error, "type": "invalid_request_error", "param": None, "code": None}},
                turn.status,
                headers=turn.headers,
            )
        if body.get("stream") or turn.raw is not None:  # a recording is a stream, asked for or not
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(_stream(turn, include_usage), media_type="text/event-stream")
        return JSONResponse(_completion(turn))

    async def models(self, request: Request) -> Response:
        await self._record(request)
        return JSONResponse(
            {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "organization_owner"}]}
        )

    async def lmstudio_models(self, request: Request) -> Response:
        """LM Studio's own REST API (0.4+): what a model can do."""
        return JSONResponse({"models": [
            {"type": "llm", "key": MODEL, "capabilities": {"vision": False, "trained_for_tool_use": True},
             "max_context_length": 32768, "loaded_instances": [{"id": MODEL, "config": {"context_length": 8192}}]},
            {"type": "llm", "key": VISION_MODEL, "capabilities": {"vision": True, "trained_for_tool_use": True},
             "max_context_length": 131072, "loaded_instances": []},
        ]})

    async def embeddings(self, request: Request) -> Response:
        body = await self._record(request)
        return JSONResponse(
            {
                "object": "list",
                "data": [{"object": "embedding", "index": 0, "embedding": [0.25, -0.5, 0.125]}],
                "model": body.get("model"),
                "usage": {"prompt_tokens": 3, "total_tokens": 3},
            }
        )

    async def completions(self, request: Request) -> Response:
        body = await self._record(request)
        pieces = ["Once", " upon", " a", " time"]
        if not body.get("stream"):
            return JSONResponse({"id": "cmpl-1", "object": "text_completion", "model": MODEL,
                                 "choices": [{"index": 0, "text": "".join(pieces), "finish_reason": "stop"}]})

        async def events() -> AsyncIterator[bytes]:
            for i, piece in enumerate(pieces):
                finish = "stop" if i == len(pieces) - 1 else None
                payload = {"id": "cmpl-1", "object": "text_completion", "model": MODEL,
                           "choices": [{"index": 0, "text": piece, "finish_reason": finish}]}
                yield f"data: {json.dumps(payload)}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")


async def _held(request: Request, release: threading.Event, closed: threading.Event | None) -> None:
    """Waits for the test's release or for the gateway to hang up, whichever comes first (bounded)."""
    released = hung_up = False
    async with anyio.create_task_group() as group:
        async def hang_up() -> None:
            nonlocal hung_up
            while (await request.receive())["type"] != "http.disconnect":
                continue
            hung_up = True
            group.cancel_scope.cancel()

        group.start_soon(hang_up)
        try:
            released = await anyio.to_thread.run_sync(release.wait, 30, abandon_on_cancel=True)
        finally:
            if closed is not None:
                closed.set()
        group.cancel_scope.cancel()
    if not released and not hung_up:
        raise RuntimeError("the test never released the held answer")


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    payload = {
        "id": "chatcmpl-upstream",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": MODEL,
        "system_fingerprint": MODEL,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    return f"data: {json.dumps(payload)}\n\n".encode()


async def _stream(turn: Turn, include_usage: bool) -> AsyncIterator[bytes]:
    if turn.raw is not None:
        for item in turn.raw:
            yield f"data: {item if isinstance(item, str) else json.dumps(item)}\n\n".encode()
        if turn.done:
            yield b"data: [DONE]\n\n"
        return
    yield _chunk({"role": "assistant", "content": ""})
    for piece in _pieces(turn.reasoning):
        yield _chunk({"reasoning_content": piece})
    for number, piece in enumerate(_pieces(turn.content)):
        yield _chunk({"content": piece})
        if number == 0 and turn.hold_after_first_content is not None:
            try:
                released = await anyio.to_thread.run_sync(
                    turn.hold_after_first_content.wait, 30, abandon_on_cancel=True
                )
            finally:
                if turn.closed is not None:
                    turn.closed.set()  # reached when the gateway hangs up while we hold (or after release)
            if not released:
                raise RuntimeError("the test never released the held stream")
    for index, call in enumerate(turn.calls):
        call_id = str(400_000_000 + index)
        yield _chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                      "function": {"name": call.name, "arguments": ""}}]})
        for piece in _pieces(_arguments(call)):
            yield _chunk({"tool_calls": [{"index": index, "function": {"name": "", "arguments": piece}}]})
    yield _chunk({}, "tool_calls" if turn.calls else "stop")
    if include_usage:
        prompt, completion = turn.usage
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        yield f"data: {json.dumps({'id': 'chatcmpl-upstream', 'choices': [], 'usage': usage})}\n\n".encode()
    yield b"data: [DONE]\n\n"


def _completion(turn: Turn) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.content}
    if turn.reasoning:
        message["reasoning_content"] = turn.reasoning
    if turn.calls:
        message["tool_calls"] = [
            {"id": str(400_000_000 + i), "type": "function",
             "function": {"name": c.name, "arguments": _arguments(c)}}
            for i, c in enumerate(turn.calls)
        ]
    prompt, completion = turn.usage
    return {
        "id": "chatcmpl-upstream",
        "object": "chat.completion",
        "created": 1,
        "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if turn.calls else "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }


def _arguments(call: Call) -> str:
    return call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)


def _pieces(text: str) -> list[str]:
    return [text[i : i + FRAGMENT] for i in range(0, len(text), FRAGMENT)]


def readable(content: str) -> str:
    """What a model would take from a tool message: the envelope's data, or its error, as text."""
    try:
        envelope = json.loads(content)
    except ValueError:
        return content
    if not isinstance(envelope, dict) or "status" not in envelope:
        return content
    data = envelope["data"]
    if envelope["status"] == "error":
        return f"Error[{data['error']}]: {data['message']}"
    if isinstance(data, dict) and list(data) == ["result"]:
        data = data["result"]
    return data if isinstance(data, str) else json.dumps(data)


def envelopes(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool messages at the end of a request, parsed."""
    return [json.loads(content) for content in last_tool_results(body).values()]


def last_tool_results(body: dict[str, Any]) -> dict[str, str]:
    """The tool messages answering the request's last assistant turn, by tool_call_id."""
    messages = body["messages"]
    last_assistant = max(i for i, m in enumerate(messages) if m.get("role") == "assistant")
    answers = [m for m in messages[last_assistant + 1 :] if m.get("role") == "tool"]
    return {message["tool_call_id"]: message["content"] for message in answers}
