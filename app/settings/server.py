"""The server group: where the gateway listens, the address people reach it at, and what one request may take."""

from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt

from app.settings.checks import Group, WebAddress, items


class ServerSettings(Group):
    """TOOLBRIDGE_HOST, _PORT, _PUBLIC_URL, the browser guards and a request's bounds."""

    host: str = Field(default="127.0.0.1", description="Address to bind. Keep 127.0.0.1 unless you set API keys.")
    port: int = Field(default=8000, ge=1, le=65535, description="Port to listen on.")
    allowed_hosts: str = Field(
        default="",
        description="Comma-separated Host names (besides loopback and the bind address) the gateway answers to; "
        "* answers any. Guards against DNS rebinding.",
    )
    cors_origins: str = Field(
        default="",
        description="Comma-separated browser origins (https://chat.example.com) allowed to call the API, with CORS "
        "headers. Other http(s) origins except loopback are refused.",
    )
    max_body_bytes: int = Field(
        default=50 * 1024 * 1024, ge=1024, description="Largest request body accepted (413 beyond); chats carry images."
    )
    client_timeout: PositiveFloat = Field(
        default=30.0, description="Seconds a client may take to send its request head, and its whole body."
    )
    max_concurrent_requests: PositiveInt = Field(
        default=256, description="Requests handled at once; more are answered 503 with Retry-After."
    )
    shutdown_grace: NonNegativeFloat = Field(
        default=10.0, description="Seconds requests in flight may take to finish after SIGTERM or Ctrl-C, then cut off."
    )
    public_url: WebAddress = Field(
        default="",
        description="The gateway's address as people's browsers reach it (http://127.0.0.1:8000 when Open WebUI "
        "runs in Docker and calls it http://toolbridge:8000), for the links to images in answers and the sign-in's "
        "callback URL (PUBLIC_URL/oauth/callback). Empty: the address the client used."
    )

    @property
    def host_names(self) -> frozenset[str]:
        """TOOLBRIDGE_ALLOWED_HOSTS, lowercased."""
        return frozenset(name.lower() for name in items(self.allowed_hosts))

    @property
    def browser_origins(self) -> list[str]:
        """TOOLBRIDGE_CORS_ORIGINS as listed, without trailing slashes."""
        return [origin.rstrip("/") for origin in items(self.cors_origins)]
