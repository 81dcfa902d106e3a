"""Turns tool-loop events into what the client receives: one OpenAI message, streamed or whole.

Streamed, the client sees one id, a first delta `{"role": "assistant", "content": ""}`, content
deltas, exactly one chunk with a finish_reason, a usage chunk when asked for, then [DONE]. An error
after the 200 goes out as one `{"error": ...}` event, then [DONE]; so does a stream still open when the
gateway's shutdown grace runs out (ShutdownCutoff).
"""

import asyncio
import os
import time
from collections.abc import AsyncGenerator, Callable, Iterable
from contextlib import aclosing
from typing import TypeVar

import structlog

from app.chat.answer.parts import Delta as TextPart
from app.chat.answer.parts import Ended, answer_parts
from app.chat.answer.trace import PersonView, TraceMode
from app.chat.events import LoopEvent
from app.openai.accumulate import ToolCall, Usage
from app.openai.errors import ErrorEnvelope, GatewayError, error_envelope
from app.openai.wire import Chunk, Completion, Delta, Message, ToolCallDelta

log = structlog.get_logger("toolbridge.stream")

Payload = TypeVar("Payload")  # what a door's stream is made of, before its framing
DONE = "[DONE]"  # the last `data:` of an OpenAI stream; every other payload is a JSON object
SHUTTING_DOWN = "shutting_down"
# How long before the end of the shutdown grace a stream is ended by the gateway, so that its last events are
# written before the server cuts the connection (a third of the grace when that is shorter).
CUTOFF_MARGIN = 0.5

# A `data:` payload of a chat completion's stream: a chunk, an error, or "[DONE]".
ChatPayload = Chunk | ErrorEnvelope | str


class _ChunkFactory:
    """The chunks of one streamed completion: one id, one creation time, one model name on each."""

    def __init__(self, model: str | None) -> None:
        self.id = f"chatcmpl-{os.urandom(12).hex()}"  # uuid4 took five times as long
        self.created = int(time.time())
        self.model = model or "unknown"

    def chunk(self, delta: Delta, finish_reason: str | None = None) -> Chunk:
        return (
            {
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
            }
        )

    def usage_chunk(self, usage: Usage) -> Chunk:
        return (
            {
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "choices": [],
                "usage": usage.as_dict(),
            }
        )


async def stream_payloads(
    events: AsyncGenerator[LoopEvent, None], *, model: str | None, include_usage: bool, trace: TraceMode = "reasoning",
    person: PersonView | None = None, notice: str = "",
) -> AsyncGenerator[ChatPayload, None]:
    """The `data:` payloads of one streamed chat completion: JSON objects (chunks, or one error), then DONE.
    `person` and `notice` as answer_parts' (parts.py)."""
    chunks = _ChunkFactory(model)
    yield chunks.chunk({"role": "assistant", "content": ""})
    try:
        async with aclosing(answer_parts(events, trace=trace, person=person, notice=notice)) as parts:
            async for part in parts:
                if isinstance(part, TextPart):
                    yield chunks.chunk(_text_delta(part))
                elif isinstance(part, Ended):
                    if part.client_tool_calls:
                        yield chunks.chunk({"tool_calls": _tool_call_deltas(part.client_tool_calls)})
                    yield chunks.chunk({}, part.finish_reason)
                    if include_usage and part.usage is not None:
                        yield chunks.usage_chunk(part.usage)
    except GatewayError as exc:
        log.warning("stream_failed", error=exc.message, code=exc.code)
        yield exc.envelope()
    except Exception:  # boundary: after the 200 a bug must still end the stream the way clients understand
        log.exception("stream_crashed")
        yield error_envelope("Internal gateway error; see the gateway log.", "server_error")
    yield DONE


class ShutdownCutoff:
    """Ends an answer still running when the shutdown grace (TOOLBRIDGE_SHUTDOWN_GRACE) runs out the way
    clients understand, a little before the server would cut it off (a stream with no ending at all, a 500,
    and a traceback in the log): a stream with one `shutting_down` error event and [DONE] (`payloads`); an
    answer not sent yet by `on_cut` cancelling its work, for the route to answer a 503. The server calls `begin`
    once, as it starts shutting down, whichever part of the answer is running: so one request has one cut-off,
    from the wait for the model's first word to the last byte sent."""

    def __init__(self, grace: float, on_cut: Callable[[], object] | None = None) -> None:
        self._delay = max(0.0, grace - min(CUTOFF_MARGIN, grace / 3))
        self.on_cut = on_cut  # what cancels the work running now, if that is not a stream's `payloads`
        self._task: asyncio.Task[object] | None = None
        self._waiting = False  # the stream's task waits for its next payload: an interruption lands there
        self._timer: asyncio.TimerHandle | None = None
        self.cut = False

    def begin(self) -> None:
        self._timer = asyncio.get_running_loop().call_later(self._delay, self._cut_off)

    def end(self) -> None:
        """The answer is over: nothing to cut any more."""
        if self._timer is not None:
            self._timer.cancel()

    def _cut_off(self) -> None:
        self.cut = True
        log.warning("answer_cut_at_shutdown", after_seconds=round(self._delay, 2))
        if self.on_cut is not None:
            self.on_cut()
        if self._waiting and self._task is not None:
            self._task.cancel()

    async def payloads(
        self, payloads: AsyncGenerator[Payload, None], ending: Callable[[], Iterable[Payload]]
    ) -> AsyncGenerator[Payload, None]:
        """`payloads` as they come, until the cut-off; then the `ending` that says so in the wire format."""
        task = self._task = asyncio.current_task()
        assert task is not None
        try:
            async with aclosing(payloads):
                while not self.cut:
                    self._waiting = True
                    try:
                        payload = await anext(payloads)
                    except StopAsyncIteration:
                        return
                    except asyncio.CancelledError:
                        if not self.cut or task.uncancel() > 0:  # not ours, or someone else's too
                            raise
                        break
                    finally:
                        self._waiting = False
                    yield payload
        finally:
            self.end()
        for payload in ending():
            yield payload


CUT_OFF_MESSAGE = "The gateway is shutting down; this answer was cut off. Send the request again."


def chat_cut_off() -> list[ChatPayload]:
    """How a chat completion's stream ends when the shutdown cuts it off: one error event, then DONE."""
    return [error_envelope(CUT_OFF_MESSAGE, "server_error", code=SHUTTING_DOWN), DONE]


async def collect_completion(
    events: AsyncGenerator[LoopEvent, None], *, model: str | None, trace: TraceMode = "reasoning",
    person: PersonView | None = None, notice: str = "",
) -> Completion:
    """The whole `chat.completion` object for a non-streaming request; `notice` as `stream_payloads`'."""
    chunks = _ChunkFactory(model)
    content: list[str] = []
    reasoning: list[str] = []
    finished = Ended("stop", None)
    async with aclosing(answer_parts(events, trace=trace, person=person, notice=notice)) as parts:
        async for part in parts:
            if isinstance(part, TextPart):
                content.append(part.content)
                reasoning.append(part.reasoning)
            elif isinstance(part, Ended):
                finished = part
    message: Message = {"role": "assistant", "content": "".join(content)}
    if any(reasoning):
        message["reasoning_content"] = "".join(reasoning)
    if finished.client_tool_calls:
        message["tool_calls"] = [call.to_message_part() for call in finished.client_tool_calls]
        message["content"] = message["content"] or None
    completion: Completion = {
        "id": chunks.id,
        "object": "chat.completion",
        "created": chunks.created,
        "model": chunks.model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finished.finish_reason}],
    }
    if finished.usage is not None:
        completion["usage"] = finished.usage.as_dict()
    return completion


def _text_delta(part: TextPart) -> Delta:
    delta: Delta = {}
    if part.reasoning:
        delta["reasoning_content"] = part.reasoning
    if part.content:
        delta["content"] = part.content
    return delta


def _tool_call_deltas(calls: list[ToolCall]) -> list[ToolCallDelta]:
    return [
        {"index": index, **call.to_message_part()}
        for index, call in enumerate(calls)
    ]
