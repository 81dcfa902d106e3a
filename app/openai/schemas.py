"""OpenAI wire models. Inbound models accept unknown fields and carry them on untouched."""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class WireModel(BaseModel):
    # OpenAI clients send many fields we do not model; the upstream must still get them.
    model_config = ConfigDict(extra="allow")


class ChatMessage(WireModel):
    role: str
    content: Any = None


class ChatCompletionRequest(WireModel):
    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None

    def to_upstream_body(self) -> dict[str, Any]:
        """The request as the client sent it: every field it set, none it did not."""
        return self.model_dump(exclude_unset=True)

    @property
    def include_usage(self) -> bool:
        return bool((self.stream_options or {}).get("include_usage"))
