"""The upstream group: the model server, how it is reached, and what its model can do when it does not say."""

from typing import Literal

from pydantic import Field, HttpUrl, PositiveFloat, PositiveInt, SecretStr

from app.settings.checks import Group
from app.settings.vocabularies import TransportKind


class UpstreamSettings(Group):
    """TOOLBRIDGE_UPSTREAM_*, the model's context and vision."""

    url: HttpUrl = Field(
        default=HttpUrl("http://localhost:1234/v1"),
        description="Base URL of the OpenAI-compatible upstream (LM Studio, llama.cpp, Ollama, vLLM).",
    )
    api_key: SecretStr | None = Field(
        default=None, description="Key sent to the upstream as a bearer token. Clients' keys are never forwarded."
    )
    transport: TransportKind = Field(
        default="aiohttp", description="HTTP stack for upstream calls: aiohttp (faster) or httpx's own."
    )
    timeout: PositiveFloat = Field(
        default=600.0, description="Seconds to wait for the upstream to answer (read timeout per chunk)."
    )
    vision: Literal["auto", "on", "off"] = Field(
        default="auto", description="Send images from tool results to the model: auto asks LM Studio if it has vision."
    )
    context_tokens: PositiveInt | None = Field(
        default=None, description="The model's context window in tokens. Unset: what the upstream reports (LM Studio's "
        "loaded context, llama.cpp's n_ctx), else 8192 for fitting restored results and no limit on tools. Set, "
        "it wins over the upstream's report: the tool budget and restored tool results are fitted into it."
    )

    @property
    def base(self) -> str:
        """The upstream URL without a trailing slash, ready to join paths onto."""
        return str(self.url).rstrip("/")
