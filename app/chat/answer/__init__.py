"""The answer: the loop's events as the person sees them, in every door's format: the trace of tool work (and its
removal from the history again), what tool results address to the person (images, user-only text), the parts every
door shows, and the OpenAI chat message streamed as chunks or whole. Its face: the names below."""

from app.chat.answer.images import ImageStore, StoredImage
from app.chat.answer.parts import AnswerPart, CallsDone, Delta, Ended, answer_parts
from app.chat.answer.streaming import (
    CUT_OFF_MESSAGE,
    SHUTTING_DOWN,
    ChatPayload,
    Payload,
    ShutdownCutoff,
    chat_cut_off,
    collect_completion,
    stream_payloads,
)
from app.chat.answer.trace import HEADER as TRACE_HEADER
from app.chat.answer.trace import ROUTE as IMAGES_ROUTE
from app.chat.answer.trace import SIGN_IN_MARK, PersonView, RecordedCall, TraceMode, read_back, strip_trace, trace_mode

__all__ = [
    "CUT_OFF_MESSAGE", "IMAGES_ROUTE", "SHUTTING_DOWN", "SIGN_IN_MARK", "TRACE_HEADER", "AnswerPart", "CallsDone",
    "ChatPayload", "Delta", "Ended", "ImageStore", "Payload", "PersonView", "RecordedCall", "ShutdownCutoff",
    "StoredImage", "TraceMode", "answer_parts", "chat_cut_off", "collect_completion", "read_back", "stream_payloads",
    "strip_trace", "trace_mode",
]
