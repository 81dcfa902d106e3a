"""What a request does before its first round when the round before waited for the person: run or refuse its
calls (`Held`), and what the model is told of a call that did not run (`NotRun`)."""

from collections.abc import Sequence
from dataclasses import dataclass, field

from app.chat.events import ToolsRan
from app.chat.ports import ImagePart, ToolAnswers
from app.openai.accumulate import ToolCall
from app.openai.wire import JSONValue, Message


@dataclass(frozen=True)
class NotRun:
    """The result the model is given for a call that did not run (a `ToolOutput`)."""

    content: str
    retryable: bool  # a call refused for lateness or another reply may be asked about again; a declined one not
    is_error: bool = True
    images: Sequence[ImagePart] = ()
    data: JSONValue = None
    shown: Sequence[ImagePart | str] = ()
    input_needed: None = None

    @property
    def error_message(self) -> str:
        return self.content


@dataclass(frozen=True)
class Held:
    """What the request does before its first round: run or refuse a waiting round's calls, or say that
    nothing waits any more (`notice`: then nothing else happens)."""

    calls: tuple[ToolCall, ...] = ()
    refused: dict[str, NotRun] = field(default_factory=dict)  # by call id; the others run
    reply: Message | None = None  # the person's message, answered after the calls' results
    # Decided on the status page before `reply`: the turn's stored entry holds the calls' results, which later
    # requests give the model before the reply (memory_restore.py).
    decided: bool = False
    notice: str | None = None
    remember_notice: bool = False  # the notice asks again: the next request leaves it and the reply before it out
    answers: dict[str, ToolAnswers] = field(default_factory=dict)  # by call id: sent again with the person's answers

    def to_run(self) -> list[ToolCall]:
        return [call for call in self.calls if call.id not in self.refused]

    def not_run(self) -> ToolsRan:
        refused = [call for call in self.calls if call.id in self.refused]
        return ToolsRan(refused, [self.refused[call.id] for call in refused], [0.0] * len(refused))
