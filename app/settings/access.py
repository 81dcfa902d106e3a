"""The access group: the client keys the gateway takes (its callers' sign-in), and what may be read without one."""

from functools import cached_property

from pydantic import Field, SecretStr

from app.settings.checks import ClientKeys, Group, PathsText, items


class AccessSettings(Group):
    """TOOLBRIDGE_API_KEYS, TOOLBRIDGE_KEYS_FILE and TOOLBRIDGE_METRICS_PUBLIC."""

    api_keys: ClientKeys = Field(
        default=SecretStr(""),
        description="Comma-separated bearer keys clients must send. Empty means no authentication."
    )
    keys_file: PathsText = Field(
        default="",
        description="A JSON file of client keys, each limited to named MCP servers and toolsets "
        "(docs/configuration.md: The keys file), beside TOOLBRIDGE_API_KEYS, whose keys may use everything; "
        "re-read when it is saved.",
    )
    metrics_public: bool = Field(
        default=False, description="Serve /metrics without an API key even when TOOLBRIDGE_API_KEYS is set."
    )

    def model_post_init(self, context: object) -> None:
        self.authenticates  # noqa: B018 (read by every request: worked out here, once, as the settings never change)

    @cached_property
    def client_keys(self) -> frozenset[str]:
        """The bearer keys clients may use; empty means authentication is off."""
        return frozenset(items(self.api_keys.get_secret_value()))

    @cached_property
    def authenticates(self) -> bool:
        """Whether callers must show a key: TOOLBRIDGE_API_KEYS or a keys file is set."""
        return bool(self.client_keys) or bool(self.keys_file)

