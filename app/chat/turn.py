"""One chat turn as the chat wing reads it: the conversation's messages, the client's own tools, what the upstream
gets as the client sent it, and who asks (their key, Open WebUI's chat, the trace and tools they chose).

A door builds it once from the request it parsed and checked (`Turn.read`: a chat body that `app/openai/schemas.py`
validated, and the request's headers); from there the chat service and the tool loop read the turn, never the
HTTP request or the raw body. Frozen: a step that changes what is sent (the toolset's real model, a slash
command's prompt) makes a new turn, so what a door built is what it reads back.
"""

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Self

from app.access import presented_key
from app.chat.answer import TRACE_HEADER
from app.chat.clients import chat_id
from app.chat.offer import TOOLS_HEADER, Chosen
from app.openai.wire import ChatBody, Message, Tool


@dataclass(frozen=True)
class Caller:
    """Who asks, as their request says: what the chat wing needs of its headers, and nothing else of them."""

    api_key: str | None = None  # the key presented (checked by the guard before the door), for memory's owner
    chat_id: str | None = None  # Open WebUI's chat, which narrows the conversation's memory
    trace: str | None = None  # the X-Toolbridge-Trace header as sent
    tools: str | None = None  # the X-Toolbridge-Tools header as sent

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> Self:
        return cls(presented_key(headers), chat_id(headers), headers.get(TRACE_HEADER), headers.get(TOOLS_HEADER))


@dataclass(frozen=True)
class Turn:
    """One chat request, read. `sent` is the body as the client sent it, which the upstream gets but for what the
    gateway changes (the model, the tools, the history); the fields below are read from it once."""

    sent: ChatBody
    messages: tuple[Message, ...]
    client_tools: tuple[Tool, ...]  # the tools the client offers itself; its calls of them go back to it
    model: str | None  # as the upstream gets it (a virtual model's toolset taken off by `toolsets.py`)
    asked_model: str | None  # as the client named it (a virtual model too), for the answer's `model`
    stream: bool
    include_usage: bool  # the client asked for usage at the end of its stream
    caller: Caller = Caller()

    @classmethod
    def read(cls, body: ChatBody, caller: Caller = Caller()) -> Self:
        """The turn of a chat body that `ChatCompletionRequest` checked (messages a non-empty list of objects with
        a role, tools objects with a type, stream a bool, stream_options an object or absent)."""
        model = body.get("model")
        return cls(sent=body, messages=tuple(body["messages"]), client_tools=tuple(body.get("tools") or ()),
                   model=model, asked_model=model, stream=bool(body.get("stream")),
                   include_usage=bool((body.get("stream_options") or {}).get("include_usage")), caller=caller)

    @classmethod
    def from_request(cls, body: ChatBody, headers: Mapping[str, str]) -> Self:
        """The turn of a checked chat body, and its caller as the request's headers say."""
        return cls.read(body, Caller.from_headers(headers))

    def chosen(self, chosen: Chosen) -> "Turn":
        """The turn as its upstream gets it once its user chose tools: the toolset's real model, our metadata key
        taken off. The turn itself when nothing changes."""
        if chosen.model == self.model and chosen.metadata is None:
            return self
        sent = self.sent.copy()
        if chosen.model is not None:
            sent["model"] = chosen.model
        if chosen.metadata:
            sent["metadata"] = chosen.metadata
        elif chosen.metadata is not None:
            del sent["metadata"]
        return replace(self, sent=sent, model=chosen.model)
