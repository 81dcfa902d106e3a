"""What a front door is: a name, the paths it owns, its routes, what it calls the conversation, and the shape its
clients read an error in. The registry (app/doors/registry.py) lists the doors; the app mounts each door's routes
and answers every error, the guards' refusals included, in the shape of the door that owns the request's path."""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app.openai.errors import GatewayError

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


@dataclass(frozen=True)
class FrontDoor:
    """A Door made of its parts."""

    name: str
    paths: tuple[str, ...]
    router: Any  # a FastAPI router (see Door.router)
    errors: ErrorShape
    conversation: str = "messages"

    def error_body(self, error: GatewayError) -> Mapping[str, object]:
        return self.errors(error)


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
