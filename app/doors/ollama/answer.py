"""Ollama's chat answer: the answer's parts (app/chat/answer/parts.py) as NDJSON lines, or as one object.

Streamed, each piece of text is a line `{model, created_at, message: {role, content, thinking?}, done: false}`;
the client's own tool calls come on a line of their own (`message.tool_calls`, arguments as objects), and the
last line says `done: true` with `done_reason` and Ollama's counts and durations. A failure after the answer
began is one `{"error": "..."}` line, as Ollama streams one (the `ollama` library raises it as ResponseError).

The reasoning channel, where the tool trace goes in the default trace mode, is `message.thinking` whatever the
request's `think` says: Open WebUI and the `ollama` library read `thinking` whenever it is there (Open WebUI
folds it away as reasoning), `think` is absent from most requests, and the trace is the gateway's account of
its tools, which X-Toolbridge-Trace and TOOLBRIDGE_TOOL_TRACE turn off, not the model's thinking.
"""

import time
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass

import orjson
import structlog

from app.chat import CUT_OFF_MESSAGE, ChatReply, Delta, Ended, PersonView, answer_parts
from app.doors.body import DoorBody
from app.doors.door import Answer, DoorContext, Stream, Streamed, Timing, Whole
from app.doors.ollama.request import chat_body
from app.doors.ollama.wire import Chunk, Durations, Ending, ErrorLine, LastLine, Line, Message, ToolCall
from app.openai.accumulate import ToolCall as CallMade
from app.openai.errors import GatewayError
from app.openai.wire import JSONObject, JSONValue

log = structlog.get_logger("toolbridge.ollama")

NDJSON = "application/x-ndjson"


def _durations(timing: Timing) -> Durations:
    """Ollama's durations (ns): its `load_duration` is the wait for the upstream to accept (where a model server loads
    the model), `prompt_eval_duration` the wait for the first text after that."""
    now = time.perf_counter_ns()
    first = timing.first if timing.first is not None else now
    return {"total_duration": now - timing.started, "load_duration": timing.accepted - timing.started,
            "prompt_eval_duration": first - timing.accepted, "eval_duration": now - first}


@dataclass(frozen=True)
class OllamaExchange:
    """An Ollama chat request, made a chat body (request.py); its answer NDJSON lines or one object."""

    chat: DoorBody

    @classmethod
    def parse(cls, body: JSONObject) -> "OllamaExchange":
        return cls(chat_body(body))

    async def chat_body(self, context: Callable[[], DoorContext]) -> DoorBody:
        return self.chat

    def render(self, reply: ChatReply, person: PersonView | None, timing: Timing) -> Streamed | Whole:
        if self.chat.get("stream"):
            return Stream(answer_lines(reply, person, timing), line, cut_off, media_type=NDJSON)
        return Answer(whole_answer(reply, person, timing))


def line(payload: Chunk) -> bytes:
    """One NDJSON line."""
    return orjson.dumps(payload) + b"\n"


def created_at() -> str:
    """Now in RFC 3339 with nanoseconds, in UTC, as Ollama writes `created_at`."""
    seconds, nanos = divmod(time.time_ns(), 1_000_000_000)
    return f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(seconds))}.{nanos:09d}Z"


async def answer_lines(reply: ChatReply, person: PersonView | None, timing: Timing) -> AsyncGenerator[Chunk]:
    """The NDJSON lines of a streamed answer: text, the client's tool calls, the ending; or one error."""
    model = reply.model or "unknown"
    try:
        async with aclosing(answer_parts(reply.events, trace=reply.trace, person=person, notice=reply.notice)) as parts:
            async for part in parts:
                if isinstance(part, Delta) and (part.content or part.reasoning):
                    timing.saw_text()
                    yield _line(model, _message(part.content, part.reasoning))
                elif isinstance(part, Ended):
                    if part.client_tool_calls:
                        yield _line(model, {**_message(""), "tool_calls": tool_calls(part.client_tool_calls)})
                    yield {**_line(model, _message(""), done=True), **_ending(part, timing)}
    except GatewayError as exc:
        log.warning("stream_failed", error=exc.message, code=exc.code)
        yield ollama_error(exc)
    except Exception:  # boundary: after the 200 a bug must still end the stream the way clients understand
        log.exception("stream_crashed")
        yield {"error": "Internal gateway error; see the gateway log."}


async def whole_answer(reply: ChatReply, person: PersonView | None, timing: Timing) -> LastLine:
    """The answer as one object: the whole message and the ending's fields.

    Raises:
        GatewayError: as the loop's, for the route to answer in Ollama's error shape.
    """
    content: list[str] = []
    reasoning: list[str] = []
    ended = Ended("stop", None)
    async with aclosing(answer_parts(reply.events, trace=reply.trace, person=person, notice=reply.notice)) as parts:
        async for part in parts:
            if isinstance(part, Delta):
                timing.saw_text()
                content.append(part.content)
                reasoning.append(part.reasoning)
            elif isinstance(part, Ended):
                ended = part
    message = _message("".join(content), "".join(reasoning))
    if ended.client_tool_calls:
        message["tool_calls"] = tool_calls(ended.client_tool_calls)
    return {**_line(reply.model or "unknown", message, done=True), **_ending(ended, timing)}


def cut_off() -> list[Chunk]:
    """How a stream ends when the gateway's shutdown cuts it off: one error line."""
    return [{"error": CUT_OFF_MESSAGE}]


def tool_calls(calls: list[CallMade]) -> list[ToolCall]:
    """The client's own tool calls in Ollama's spelling: arguments as an object, with the call's id (Ollama's
    server sends one; the `ollama` library ignores it) and the function's index."""
    return [{"id": call.id, "function": {"index": index, "name": call.name, "arguments": _arguments(call.arguments)}}
            for index, call in enumerate(calls)]


def _arguments(text: str) -> JSONObject:
    try:
        arguments: JSONValue = orjson.loads(text or "{}")
    except orjson.JSONDecodeError:
        return {}  # a model's broken JSON: Ollama's clients can only read an object; the call's name still goes
    return arguments if isinstance(arguments, dict) else {}


def _message(content: str, reasoning: str = "") -> Message:
    message: Message = {"role": "assistant", "content": content}
    if reasoning:
        message["thinking"] = reasoning
    return message


def _line(model: str, message: Message, *, done: bool = False) -> Line:
    return {"model": model, "created_at": created_at(), "message": message, "done": done}


def _ending(ended: Ended, timing: Timing) -> Ending:
    """`done_reason` and the counts and durations (ns) of the last line; Ollama ends tool calls with "stop" too."""
    usage = ended.usage
    return {"done_reason": "length" if ended.finish_reason == "length" else "stop", **_durations(timing),
            "prompt_eval_count": usage.prompt_tokens if usage else 0,
            "eval_count": usage.completion_tokens if usage else 0}


def ollama_error(error: GatewayError) -> ErrorLine:
    """`{"error": "<message>"}`, as Ollama answers (and streams) a failure."""
    return {"error": error.message}


def ollama_error_body(error: GatewayError) -> JSONObject:
    """ollama_error as the body of an error response (the door's error shape: JSON, as every door's)."""
    return {"error": error.message}
