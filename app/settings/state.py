"""The state group: where conversation memory and the sign-in tokens are kept, their bounds, and the gateway's
secret that encrypts and seals them."""

from pydantic import Field, PositiveFloat

from app.settings.checks import FernetKey, Group, StateUrl
from app.settings.vocabularies import default_state_url


class StateSettings(Group):
    """TOOLBRIDGE_STATE_* and TOOLBRIDGE_TOKEN_KEY."""

    url: StateUrl = Field(
        default_factory=default_state_url,
        description="Where conversation memory is kept (earlier turns' MCP calls and results, restored for the model): "
        "sqlite:///relative.db or sqlite:////absolute.db, redis://[:password@]host:port/db (shared by replicas), "
        "memory:// (this process only), or none. Default: "
        "state.db in the user data directory (~/.local/share/toolbridge on Linux).",
    )
    token_key: FernetKey | None = Field(
        default=None,
        description="The gateway's secret, a Fernet key (32 bytes, url-safe base64): it encrypts sign-in tokens "
        "at rest and seals the state store. Unset: one generated on first use, kept owner-only beside the SQLite "
        "file (state.tokens.key). Required with a redis:// state URL, where replicas share the store.",
    )
    max_mb: PositiveFloat = Field(
        default=200.0, description="Megabytes the conversation memory may hold; the oldest turns are forgotten first."
    )
    max_age_days: PositiveFloat = Field(
        default=30.0, description="Days a turn is remembered; older ones are forgotten."
    )

    @property
    def secret_key(self) -> str | None:
        """TOOLBRIDGE_TOKEN_KEY's text, or None: unset."""
        return self.token_key.get_secret_value() if self.token_key else None
