"""The answer's parts (app/chat/answer/parts.py) spelled as a Responses API response: streamed as its events, or
whole as one `response` object. Both come from one writer, so the whole response is exactly what the stream's
`response.completed` carries.

The output is the answer in the order it happened: a `reasoning` item for the model's thinking and the tool
trace, an `mcp_call` item for each MCP call the gateway ran (left out when the trace is off), a `message` for
the text said (a new one after each trace, so the items follow one another; their texts joined are the
answer, `response.output_text`), and a `function_call` item for each client tool handed back. What tool results
address to the person (an image's link) goes into the message of the words said next, since clients take the
last message as the answer (`codex exec` prints it, and `-o` writes it). Streamed, every
event has its `type` and a `sequence_number` counting from 0; an error after the stream began is an `error`
event, then `response.failed` with the response as far as it got, and the stream ends.
"""

import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field

import orjson
import structlog

from app.chat import (
    CUT_OFF_MESSAGE,
    SHUTTING_DOWN,
    AnswerPart,
    CallsDone,
    ChatReply,
    Delta,
    Ended,
    PersonView,
    answer_parts,
)
from app.doors.body import DoorBody
from app.doors.door import Answer, DoorContext, Stream, Streamed, Timing, Whole
from app.doors.responses.items import TextItem, TextKind, function_call, item_id, mcp_call
from app.doors.responses.request import ResponsesRequest, read_request
from app.doors.responses.store import StoredResponses
from app.doors.responses.wire import Echo, Event, Response, ResponseCore, Usage
from app.openai.accumulate import Usage as Tokens
from app.openai.errors import GatewayError
from app.openai.wire import JSONObject, Message

log = structlog.get_logger("toolbridge.responses")

OnEnd = Callable[[Response, Message], Awaitable[None]]  # the response, the answer as a chat message


class ResponseWriter:
    """One response as it is written: its items, its events numbered in order, and the answer as a chat message
    (what a Chat Completions client would send back of it, for the stored conversation)."""

    def __init__(self, model: str | None, echo: Echo, *, show_mcp_calls: bool = True,
                 namespaced: dict[str, tuple[str, str]] | None = None, summary: bool = False) -> None:
        own: ResponseCore = {
            "id": item_id("resp"), "object": "response", "created_at": int(time.time()), "model": model or "unknown",
            "status": "in_progress", "error": None, "incomplete_details": None, "output": [], "usage": None,
        }
        self.response: Response = {**own, **echo}
        self._show_mcp_calls = show_mcp_calls
        self._namespaced = namespaced or {}
        self._summary = summary  # the reasoning as its summary (responses_items.SUMMARIES)
        self._sequence = 0
        self._open: TextItem | None = None
        self._said: list[str] = []
        self._held = ""  # what tool results address to the person, until the words said next
        self.message: Message = {"role": "assistant", "content": ""}
        self.ended = False

    def numbered(self, event: Event) -> Event:
        event["sequence_number"] = self._sequence
        self._sequence += 1
        return event

    def begin(self) -> list[Event]:
        snapshot: Response = {**self.response, "output": []}
        return [self.numbered({"type": "response.created", "response": snapshot}),
                self.numbered({"type": "response.in_progress", "response": snapshot.copy()})]

    def take(self, part: AnswerPart) -> list[Event]:
        """The events of one part of the answer, numbered."""
        if isinstance(part, Delta):
            events = [*self._text("reasoning", part.reasoning), *self._say(part.content, part.shown)]
        elif isinstance(part, CallsDone):
            events = self._calls_done(part) if self._show_mcp_calls else []
        else:
            events = self._end(part)
        return [self.numbered(event) for event in events]

    def finished(self) -> Event:
        """The last event: the whole response, completed or incomplete."""
        return self.numbered({"type": f"response.{self.response['status']}", "response": self.response})

    def failed(self, message: str, code: str | None, param: str | None = None) -> list[Event]:
        """How a stream that failed ends: the `error` event the openai SDK hands over, then `response.failed`,
        the end Codex waits for (it reads the message there, and takes an `error` event for an unknown one)."""
        error = self.numbered({"type": "error", "code": code, "message": message, "param": param})
        self.response |= {"status": "failed", "error": {"code": code or "server_error", "message": message}}
        return [error, self.numbered({"type": "response.failed", "response": self.response})]

    def cut_off(self) -> list[Event]:
        """How the stream ends when the gateway's shutdown cuts it off (send_stream's `cut_off`)."""
        return self.failed(CUT_OFF_MESSAGE, SHUTTING_DOWN)

    def _say(self, text: str, shown: bool) -> list[Event]:
        """Text said. What tool results address to the person waits, with the blank lines after it, for the next
        words, so that a later round's reasoning does not put it in a message of its own (_end says the rest)."""
        if shown or (self._held and not text.strip()):
            self._held += text
            return []
        text, self._held = self._held + text, ""
        return self._text("message", text)

    def _text(self, kind: TextKind, text: str) -> list[Event]:
        if not text:
            return []
        events: list[Event] = []
        if self._open is None or self._open.kind != kind:
            events = self._close()
            self._open = TextItem(kind, len(self.response["output"]), summary=self._summary)
            events += self._open.opened()
        if kind == "message":
            self._said.append(text)
        return [*events, self._open.delta(text)]

    def _close(self, status: str = "completed") -> list[Event]:
        if self._open is None:
            return []
        item, events = self._open.closed(status)
        self.response["output"].append(item)
        self._open = None
        return events

    def _calls_done(self, part: CallsDone) -> list[Event]:
        events = self._close()
        for call, output in zip(part.calls, part.outputs, strict=True):
            item, item_events = mcp_call(call, output, len(self.response["output"]))
            self.response["output"].append(item)
            events += item_events
        return events

    def _end(self, part: Ended) -> list[Event]:
        incomplete = part.finish_reason == "length"
        held, self._held = self._held, ""
        events = [*self._text("message", held), *self._close("incomplete" if incomplete else "completed")]
        for call in part.client_tool_calls:
            item, item_events = function_call(call, len(self.response["output"]), *self._namespaced.get(call.name, ()))
            self.response["output"].append(item)
            events += item_events
        said = "".join(self._said)
        self.message = {"role": "assistant", "content": said}
        if part.client_tool_calls:
            self.message = {"role": "assistant", "content": said or None,
                            "tool_calls": [call.to_message_part() for call in part.client_tool_calls]}
        self.response |= {"status": "incomplete" if incomplete else "completed", "usage": _usage(part.usage),
                          "completed_at": int(time.time()),
                          "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None}
        self.ended = True
        return events


def _usage(usage: Tokens | None) -> Usage | None:
    if usage is None:
        return None
    return {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0}}


async def response_events(
    parts: AsyncGenerator[AnswerPart, None], writer: ResponseWriter, on_end: OnEnd
) -> AsyncGenerator[Event, None]:
    """The stream's events. `on_end` runs (the response stored) before `response.completed` is sent, so that a
    client continuing at once finds it."""
    for event in writer.begin():
        yield event
    try:
        async with aclosing(parts):
            async for part in parts:
                for event in writer.take(part):
                    yield event
                if writer.ended:
                    await on_end(writer.response, writer.message)
                    yield writer.finished()
                    return
        failure = writer.failed("The answer ended before it was complete.", "server_error")
    except GatewayError as exc:
        log.warning("responses_stream_failed", error=exc.message, code=exc.code)
        failure = writer.failed(exc.message, exc.code, exc.param)
    except Exception:  # boundary: after the 200 a bug must still end the stream the way clients understand
        log.exception("responses_stream_crashed")
        failure = writer.failed("Internal gateway error; see the gateway log.", "server_error")
    for event in failure:
        yield event


async def whole_response(parts: AsyncGenerator[AnswerPart, None], writer: ResponseWriter, on_end: OnEnd) -> Response:
    """The whole response, once the answer is complete; a failure is raised (GatewayError) for the route."""
    async with aclosing(parts):
        async for part in parts:
            writer.take(part)
    if not writer.ended:
        raise GatewayError("The answer ended before it was complete.")
    await on_end(writer.response, writer.message)
    return writer.response


@dataclass
class ResponsesExchange:
    """A Responses request (request.py): its chat body made of the earlier responses it continues (kept by store.py)
    and its input; its answer the API's events or one response, kept for a later `previous_response_id`."""

    request: ResponsesRequest
    stored: StoredResponses | None = None  # where it is kept, once chat_body has read its earlier turns
    chain: list[str] = field(default_factory=list)  # the ids of the responses it continues, oldest first

    @classmethod
    def parse(cls, body: JSONObject) -> "ResponsesExchange":
        return cls(read_request(body))

    async def chat_body(self, context: Callable[[], DoorContext]) -> DoorBody:
        """The conversation: earlier turns read back from the responses it continues, then the new input."""
        app = context()
        self.stored = StoredResponses(app.store, app.owner)
        history: list[Message] = []
        if self.request.previous_response_id is not None:
            self.chain, history = await self.stored.conversation(self.request.previous_response_id,
                                                                 app.max_body_bytes)
        return {**self.request.chat_body, "messages": self.request.chat_messages(history)}

    def render(self, reply: ChatReply, person: PersonView | None, timing: Timing) -> Streamed | Whole:
        request = self.request
        writer = ResponseWriter(reply.model, request.echo, show_mcp_calls=reply.trace != "off",
                                namespaced=request.namespaced, summary=request.summary)
        parts = answer_parts(reply.events, trace=reply.trace, person=person, notice=reply.notice)
        if request.stream:
            return Stream(response_events(parts, writer, self._keep), server_sent, writer.cut_off)
        return Answer(whole_response(parts, writer, self._keep))

    async def _keep(self, response: Response, message: Message) -> None:
        if self.request.store and self.stored is not None:
            await self.stored.keep(response, self.chain, [*self.request.input_messages, message])


def server_sent(event: Event) -> bytes:
    """One SSE event named by its type, as the API sends them (sse-starlette sends bytes as they are)."""
    kind: str = event["type"]
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"
