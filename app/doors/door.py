"""What a front door is: a name, the paths it owns, its routes, what it calls the conversation, how it reads a request
(`parse`: into an `Exchange`, which makes the chat body the turn is read from and writes the answer back in the door's
wire format, streamed or whole), and the shape its clients read an error in. The registry (app/doors/registry.py)
lists the doors; the app mounts each door's routes and answers every error, the guards' refusals included, in the
shape of the door that owns the request's path. A door's chat route is one call: app/api/doors.py's `serve_chat`
reads the body, has the door parse it, answers the turn and sends what the exchange renders."""

import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import orjson

from app.chat import ChatReply, PersonView, ShutdownCutoff
from app.openai.errors import GatewayError
from app.openai.wire import JSONObject
from app.state import StateStore

P = TypeVar("P")  # what a stream is made of before its framing: a chunk, an event, a line
A = TypeVar("A")  # a whole answer before it is encoded

ErrorShape = Callable[[GatewayError], Mapping[str, object]]  # the error's body, as the door's clients read it


class Door(Protocol):
    """A front door onto the tool loop. Its routes read a request into a chat body, answer it through the shared door
    handling (app/api/doors.py) and render the answer's parts in the door's wire format, whole or streamed."""

    @property
    def name(self) -> str:
        """The door's word in the status page's recent requests: "chat", "responses", "messages", "ollama"."""
        ...

    @property
    def paths(self) -> tuple[str, ...]:
        """The paths it owns: each itself and what is under it ("/v1/messages", "/v1/messages/count_tokens"); one
        ending with "/" is a prefix ("/api/")."""
        ...

    @property
    def conversation(self) -> str:
        """What the door calls the conversation, named in a 400 about it: "messages", "input"."""
        ...

    @property
    def router(self) -> Any:
        """Its routes: a FastAPI router, made by its `routes` module (the HTTP layer's part of the door). `Any`: this
        module may not name the web framework (the import contracts), and the app mounts it as one."""
        ...

    def error_body(self, error: GatewayError) -> Mapping[str, object]:
        """The body that tells the door's client about `error` (its headers are the error's own)."""
        ...

    def parse(self, body: JSONObject) -> "Exchange":
        """The door's request, read from its JSON body (the gateway's checks done: content type, NaN, size).

        Raises:
            InvalidRequest: what the door cannot translate, naming the field.
        """
        ...


@dataclass(frozen=True)
class DoorContext:
    """What a door's request may need of the app to become a chat body: where the door keeps its own (the Responses
    door's stored responses), whose they are, and how much one request may bring."""

    store: StateStore | None
    owner: str
    max_body_bytes: int


@dataclass
class Timing:
    """When the request came (`started`) and the upstream accepted it (`accepted`), on the perf_counter_ns clock; the
    first text after that once it comes. Ollama's answer reports durations measured from them."""

    started: int
    accepted: int
    first: int | None = None

    def saw_text(self) -> None:
        if self.first is None:
            self.first = time.perf_counter_ns()


class Exchange(Protocol):
    """One request as its door read it: the chat body it asks the chat service, and the answer written back."""

    async def chat_body(self, context: Callable[[], DoorContext]) -> Mapping[str, object]:
        """The chat body the turn is read from, as the door made it: the app checks it as a chat request's body
        before anything reads it (app/api/doors.py's `answer`). `context` says what the door may need of the app,
        worked out when asked (most doors need nothing)."""
        ...

    def render(self, reply: ChatReply, person: PersonView | None, timing: Timing) -> "Streamed | Whole":
        """The answer in the door's wire format: streamed or whole, as the request asked."""
        ...


class Streamed(Protocol):
    """An answer sent as it comes."""

    @property
    def media_type(self) -> str: ...

    def frames(self, cutoff: ShutdownCutoff) -> AsyncIterator[bytes]:
        """The answer's frames, ending with the door's own words when the shutdown cuts it off."""
        ...


@runtime_checkable
class Whole(Protocol):
    """An answer sent once it is all there."""

    @property
    def media_type(self) -> str: ...

    async def body(self) -> bytes: ...


@dataclass(frozen=True)
class Stream(Generic[P]):
    """A `Streamed` answer: its payloads, how each is framed (an SSE event, an NDJSON line), and how the stream ends
    when the shutdown cuts it off."""

    payloads: AsyncGenerator[P, None]
    encode: Callable[[P], bytes]
    cut_off: Callable[[], Iterable[P]]
    media_type: str = "text/event-stream"

    async def frames(self, cutoff: ShutdownCutoff) -> AsyncIterator[bytes]:
        # Closed with the frames: a client that leaves stops the answer (and its loop) now, not when it is collected.
        async with aclosing(cutoff.payloads(self.payloads, self.cut_off)) as payloads:
            async for payload in payloads:
                yield self.encode(payload)


def _json(answer: object) -> bytes:
    return orjson.dumps(answer)


@dataclass(frozen=True)
class Answer(Generic[A]):
    """A `Whole` answer: made by `answer`, written by `encode` (JSON unless the door says otherwise)."""

    answer: Awaitable[A]
    encode: Callable[[A], bytes] = field(default=_json)
    media_type: str = "application/json"

    async def body(self) -> bytes:
        return self.encode(await self.answer)


@dataclass(frozen=True)
class FrontDoor:
    """A Door made of its parts."""

    name: str
    paths: tuple[str, ...]
    router: Any  # a FastAPI router (see Door.router)
    errors: ErrorShape
    parser: Callable[[JSONObject], Exchange]
    conversation: str = "messages"

    def error_body(self, error: GatewayError) -> Mapping[str, object]:
        return self.errors(error)

    def parse(self, body: JSONObject) -> Exchange:
        return self.parser(body)


def owns(door: Door, path: str) -> bool:
    """Whether `path` is the door's."""
    return any(path.startswith(owned) if owned.endswith("/") else path == owned or path.startswith(f"{owned}/")
               for owned in door.paths)


def door_for(doors: Sequence[Door], path: str) -> Door:
    """The door that owns `path`; the first door (Chat Completions) for every path no door owns."""
    return next((door for door in doors if owns(door, path)), doors[0])


def openai_error(error: GatewayError) -> Mapping[str, object]:
    """`{"error": {"message", "type", "param", "code"}}`, OpenAI's envelope (Chat Completions, Responses)."""
    return error.envelope()
