"""The chat service's answer as Anthropic's Messages API gives it: server-sent events (`event: <type>` and
`data: {...}`), or one message. The events are messages_blocks.py's; a failure after the stream began is an
`error` event in Anthropic's shape, and so is the shutdown's cut-off."""

from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass

import orjson
import structlog

from app.chat import CUT_OFF_MESSAGE, SHUTTING_DOWN, AnswerPart, ChatReply, PersonView, answer_parts
from app.doors.body import DoorBody
from app.doors.door import Answer, DoorContext, Stream, Streamed, Timing, Whole
from app.doors.messages.blocks import MessageBlocks
from app.doors.messages.errors import anthropic_error
from app.doors.messages.request import chat_body
from app.doors.messages.wire import Event, Message
from app.openai.errors import GatewayError, Overloaded
from app.openai.wire import JSONObject

log = structlog.get_logger("toolbridge.messages")


async def message_events(reply: ChatReply, person: PersonView | None) -> AsyncGenerator[Event, None]:
    """The stream's events: message_start, each block's start, deltas and stop, message_delta, message_stop;
    or, once begun, an error event when the answer fails."""
    blocks = MessageBlocks(reply.model)
    yield blocks.started()
    try:
        async with aclosing(_parts(reply, person)) as parts:
            async for part in parts:
                for event in blocks.spell(part):
                    yield event
    except GatewayError as exc:
        log.warning("stream_failed", error=exc.message, code=exc.code)
        yield anthropic_error(exc)
    except Exception:  # boundary: after the 200 a bug must still end the stream the way clients understand
        log.exception("stream_crashed")
        yield anthropic_error(GatewayError("Internal gateway error; see the gateway log."))


async def whole_message(reply: ChatReply, person: PersonView | None) -> Message:
    """The answer as one message: the content its stream would have built."""
    blocks = MessageBlocks(reply.model)
    async with aclosing(_parts(reply, person)) as parts:
        async for part in parts:
            blocks.spell(part)
    return blocks.message


def server_sent(event: Event) -> bytes:
    """One event as Anthropic frames it: the SDK reads `event:` (an event without one is skipped)."""
    return b"event: " + str(event["type"]).encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"


def messages_cut_off() -> list[Event]:
    """How a stream ends when the shutdown cuts it off: an overloaded_error, which the SDK raises."""
    return [anthropic_error(Overloaded(CUT_OFF_MESSAGE, code=SHUTTING_DOWN))]


@dataclass(frozen=True)
class MessagesExchange:
    """A Messages request, made a chat body (request.py); its answer Anthropic's events or one message."""

    chat: DoorBody

    @classmethod
    def parse(cls, body: JSONObject) -> "MessagesExchange":
        return cls(chat_body(body))

    async def chat_body(self, context: Callable[[], DoorContext]) -> DoorBody:
        return self.chat

    def render(self, reply: ChatReply, person: PersonView | None, timing: Timing) -> Streamed | Whole:
        if self.chat.get("stream"):
            return Stream(message_events(reply, person), server_sent, messages_cut_off)
        return Answer(whole_message(reply, person))


def _parts(reply: ChatReply, person: PersonView | None) -> AsyncGenerator[AnswerPart, None]:
    return answer_parts(reply.events, trace=reply.trace, person=person, notice=reply.notice)
