"""Every setting of the gateway: TOOLBRIDGE_* environment variables, a .env file, and matching flags."""

from typing import Literal
from urllib.parse import urlsplit

from pydantic import (
    Field,
    HttpUrl,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    SecretStr,
    field_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

# A leaf: nothing from app but its vocabularies and checks, so reading a setting imports no SDK and no HTTP client.
from app.settings.checks import FernetKey, LogLevel, PathsText, StateUrl, Toolsets, WebAddress
from app.settings.vocabularies import (
    ConfirmPolicy,
    PrefixMode,
    ProfileSetting,
    ResultFormat,
    ToolDiscovery,
    TraceMode,
    TransportKind,
    default_state_url,
)

TOOL_BUDGET_DEFAULT = 24  # the smallest that left the eval's 22 tools whole: below it both models lost tasks
MIN_MCP_TOOLS_DEFAULT = 4  # the eval's Open WebUI tasks at an 8k context: 4 passed 6/11, 8 passed 4/11 (docs/eval.md)
SECRET_SETTINGS = frozenset({"api_keys", "upstream_api_key", "token_key"})


class Settings(BaseSettings):
    """Gateway settings. Build one with `Settings()` and pass it to `create_app`; nothing reads a global."""

    model_config = SettingsConfigDict(
        env_prefix="TOOLBRIDGE_", env_file=".env", env_ignore_empty=True, extra="ignore"
    )

    upstream_url: HttpUrl = Field(
        HttpUrl("http://localhost:1234/v1"),
        description="Base URL of the OpenAI-compatible upstream (LM Studio, llama.cpp, Ollama, vLLM).",
    )
    upstream_api_key: SecretStr | None = Field(
        None, description="Key sent to the upstream as a bearer token. Clients' keys are never forwarded."
    )
    upstream_transport: TransportKind = Field(
        "aiohttp", description="HTTP stack for upstream calls: aiohttp (faster) or httpx's own."
    )
    upstream_timeout: PositiveFloat = Field(
        600.0, description="Seconds to wait for the upstream to answer (read timeout per chunk)."
    )
    mcp_config: PathsText = Field(
        "mcp.json",
        description="The mcp.json files listing the MCP servers, comma-separated; later files win. "
        "The word lmstudio stands for LM Studio's own mcp.json.",
    )
    host: str = Field("127.0.0.1", description="Address to bind. Keep 127.0.0.1 unless you set API keys.")
    port: int = Field(8000, ge=1, le=65535, description="Port to listen on.")
    api_keys: SecretStr = Field(
        SecretStr(""), description="Comma-separated bearer keys clients must send. Empty means no authentication."
    )
    keys_file: PathsText = Field(
        "",
        description="A JSON file of client keys, each limited to named MCP servers and toolsets "
        "(docs/configuration.md: The keys file), beside TOOLBRIDGE_API_KEYS, whose keys may use everything; "
        "re-read when it is saved.",
    )
    allowed_hosts: str = Field(
        "",
        description="Comma-separated Host names (besides loopback and the bind address) the gateway answers to; "
        "* answers any. Guards against DNS rebinding.",
    )
    cors_origins: str = Field(
        "",
        description="Comma-separated browser origins (https://chat.example.com) allowed to call the API, with CORS "
        "headers. Other http(s) origins except loopback are refused.",
    )
    max_body_bytes: int = Field(
        50 * 1024 * 1024, ge=1024, description="Largest request body accepted (413 beyond); chats carry images."
    )
    client_timeout: PositiveFloat = Field(
        30.0, description="Seconds a client may take to send its request head, and its whole body."
    )
    max_concurrent_requests: PositiveInt = Field(
        256, description="Requests handled at once; more are answered 503 with Retry-After."
    )
    metrics_public: bool = Field(
        False, description="Serve /metrics without an API key even when TOOLBRIDGE_API_KEYS is set."
    )
    max_tool_rounds: PositiveInt = Field(
        8, description="Tool rounds before the model is asked to answer without calling tools."
    )
    confirm: ConfirmPolicy = Field(
        "destructive", description="MCP tool calls that wait for the person's yes: off, destructive (annotated "
        'destructiveHint: true), writes (not annotated readOnlyHint: true), all. mcp.json\'s "confirm" wins.'
    )
    confirm_timeout: PositiveFloat = Field(
        3600.0, description="Seconds a call that asks first waits for the person's yes; a later yes does not run it."
    )
    tool_timeout: PositiveFloat = Field(
        60.0, description="Seconds a tool call may go without finishing or reporting progress."
    )
    tool_timeout_max: PositiveFloat = Field(
        600.0, description="Seconds a tool call may take at most, however often it reports progress."
    )
    watch_config: bool = Field(
        False, description="Apply changes to the mcp.json files as soon as they are saved (SIGHUP always works)."
    )
    sampling: bool = Field(
        True, description="Answer MCP servers' sampling requests (sampling/createMessage) with the upstream model."
    )
    sampling_model: str = Field(
        "", description="Model for sampling requests when the server names none; empty: the upstream's default."
    )
    block_changed_tools: bool = Field(
        False, description="Stop offering a tool whose definition a server changes, until the gateway restarts."
    )
    mcp_connect_timeout: PositiveFloat = Field(
        60.0, description="Seconds an MCP server may take to start and list its tools."
    )
    mcp_start_wait: NonNegativeFloat = Field(10.0, description="Seconds a chat waits for MCP servers still starting "
        "(after the gateway starts, or a reload adds one), then goes on without their tools and its trace names them.")
    shutdown_grace: NonNegativeFloat = Field(
        10.0, description="Seconds requests in flight may take to finish after SIGTERM or Ctrl-C, then cut off."
    )
    tool_prefix: PrefixMode = Field(
        "on-conflict", description="Prefix tool names with their server only where two servers (or a server and "
        "a client tool) clash, or always."
    )
    schema_profile: ProfileSetting = Field(
        "auto", description="How tool schemas are rewritten: lmstudio/llamacpp make them grammar-safe; auto does so "
        "for every upstream but OpenAI's API, which gets openai (strict)."
    )
    result_format: ResultFormat = Field(
        "envelope", description="Tool results as a JSON envelope with status, data and meta, or as plain text."
    )
    max_result_chars: int = Field(
        25_000, ge=1_000, description="Characters one tool result may take in the conversation; more is cut."
    )
    mcp_message_mb: PositiveFloat = Field(
        16.0, description="Megabytes one message from a stdio MCP server may take (a tool result, a resource); "
        "a call answered with more fails with an error saying so, and the gateway never holds it."
    )
    resource_tools: bool = Field(
        True, description="Offer a SERVER__read_resource tool for each MCP server with resources: the model reads "
        "them (and links in tool results) by URI."
    )
    prompt_commands: bool = Field(
        True, description="Run MCP prompts typed as a chat message: /name arg=value. /prompts lists them."
    )
    ui_show_values: bool = Field(
        False, description="Keep the arguments and results of the recent tool calls for /ui/calls (they may be "
        "private, and a tool's error message often repeats them; off keeps the tool, the time, the outcome and the "
        "error's class)."
    )
    vision: Literal["auto", "on", "off"] = Field(
        "auto", description="Send images from tool results to the model: auto asks LM Studio if it has vision."
    )
    system_hint: bool = Field(
        True, description="Add a short note on reading tool results to the system message when tools are offered."
    )
    skip_tools_for_tasks: bool = Field(
        True, description="Offer no tools to Open WebUI's background task prompts (titles, tags, follow-ups)."
    )
    tool_budget: NonNegativeInt = Field(
        TOOL_BUDGET_DEFAULT,
        description="The most MCP tools one request is offered: past it, or past half of the model's context, the "
        "tools most relevant to the conversation are kept (and those it called or the user named). 0: no budget, "
        "every tool offered whatever the context.",
    )
    min_mcp_tools: NonNegativeInt = Field(
        MIN_MCP_TOOLS_DEFAULT,
        description="The most relevant MCP tools offered whatever the context's room, so a client that sends many "
        "tools of its own (Open WebUI: 36) never leaves the model none of ours; the client's tools are then sent "
        "compact if they do not fit beside them.",
    )
    tool_order: Literal["configured", "relevance"] = Field(
        "configured", description="The order of the tools the budget keeps: as the servers and mcp.json list them "
        "(the same from turn to turn while the same tools are kept, so the model server's prompt cache holds), or "
        "the most relevant first (docs/eval.md: no clear gain for SmolLM2)."
    )
    tool_discovery: ToolDiscovery = Field(
        "off", description="find_tools: when the budget would leave MCP tools out, offer the model one find_tools "
        "tool instead of them (beside the tools it called or the user named); its call names the few that match the "
        "need, whose definitions the request offers from then on.",
    )
    rank_client_tools: bool = Field(
        False, description="Rank the client's own tools (Open WebUI sends 36) with the MCP tools under the budget, "
        "instead of always offering them all."
    )
    toolsets: Toolsets = Field(
        default_factory=dict,
        description='Named sets of MCP tools, as JSON: {"clock": ["time"], "files": ["fs", "fetch"]} (server names, '
        "or tool names as offered). /v1/models then also lists MODEL+NAME for every model, which offers only "
        "those tools.",
    )
    tool_trace: TraceMode = Field(
        "reasoning",
        description="How tool work is shown: as reasoning, Open WebUI tool blocks, text lines, or not at all. "
        "A request can choose with the header X-Toolbridge-Trace.",
    )
    show_user_content: bool = Field(
        True, description="Show the person, in the answer, the images tool results return and the content a server "
        "addresses to the user alone, in every trace mode (the model's view does not change)."
    )
    public_url: WebAddress = Field(
        "", description="The gateway's address as people's browsers reach it (http://127.0.0.1:8000 when Open WebUI "
        "runs in Docker and calls it http://toolbridge:8000), for the links to images in answers and the sign-in's "
        "callback URL (PUBLIC_URL/oauth/callback). Empty: the address the client used."
    )
    image_store_mb: PositiveFloat = Field(
        64.0, description="Megabytes the images served to browsers may take in all; the oldest go first, and one "
        "image may take a quarter."
    )
    image_max_age_hours: PositiveFloat = Field(
        24.0, description="Hours an image's link in an answer works (also until the gateway restarts)."
    )
    image_inline_bytes: NonNegativeInt = Field(
        16_384, description="Images up to this size go into Open WebUI's tool widget (details trace) as data: URLs, "
        "which last as long as the chat; larger ones are linked. 0: always linked."
    )
    state_url: StateUrl = Field(
        default_factory=default_state_url,
        description="Where conversation memory is kept (earlier turns' MCP calls and results, restored for the model): "
        "sqlite:///relative.db or sqlite:////absolute.db, redis://[:password@]host:port/db (shared by replicas), "
        "memory:// (this process only), or none. Default: "
        "state.db in the user data directory (~/.local/share/toolbridge on Linux).",
    )
    token_key: FernetKey | None = Field(
        None, description="The gateway's secret, a Fernet key (32 bytes, url-safe base64): it encrypts sign-in tokens "
        "at rest and seals the state store. Unset: one generated on first use, kept owner-only beside the SQLite "
        "file (state.tokens.key). Required with a redis:// state URL, where replicas share the store.",
    )
    state_max_mb: PositiveFloat = Field(
        200.0, description="Megabytes the conversation memory may hold; the oldest turns are forgotten first."
    )
    state_max_age_days: PositiveFloat = Field(
        30.0, description="Days a turn is remembered; older ones are forgotten."
    )
    context_tokens: PositiveInt | None = Field(
        None, description="The model's context window in tokens. Unset: what the upstream reports (LM Studio's "
        "loaded context, llama.cpp's n_ctx), else 8192 for fitting restored results and no limit on tools. Set, "
        "it wins over the upstream's report: the tool budget and restored tool results are fitted into it."
    )
    otel: bool = Field(
        False,
        description="Send OpenTelemetry traces (a span per chat request and per tool call, no message content) "
        "over OTLP to OTEL_EXPORTER_OTLP_ENDPOINT. Needs the otel extra.",
    )
    log_format: Literal["console", "json"] = Field("console", description="Log lines for people or machines.")
    log_level: LogLevel = Field("info", description="Lowest level logged.")

    @property
    def upstream_base(self) -> str:
        """The upstream URL without a trailing slash, ready to join paths onto."""
        return str(self.upstream_url).rstrip("/")

    @field_validator("api_keys")
    @classmethod
    def _keys_or_nothing(cls, value: SecretStr) -> SecretStr:
        text = value.get_secret_value()
        if text.strip() and not _items(text):  # " , " would otherwise turn authentication off unnoticed
            raise ValueError("lists no key: give one or more keys, comma-separated, or leave it empty")
        return value

    def secrets(self) -> list[str]:
        """Every secret value the settings hold, for the log to redact."""
        upstream = self.upstream_api_key.get_secret_value() if self.upstream_api_key else ""
        state_password = urlsplit(self.state_url).password or ""  # redis://:PASSWORD@host
        token_key = self.token_key.get_secret_value() if self.token_key else ""
        return [upstream, state_password, token_key, *self.client_keys]

    @property
    def client_keys(self) -> frozenset[str]:
        """The bearer keys clients may use; empty means authentication is off."""
        return frozenset(_items(self.api_keys.get_secret_value()))

    @property
    def authenticates(self) -> bool:
        """Whether callers must show a key: TOOLBRIDGE_API_KEYS or a keys file is set."""
        return bool(self.client_keys) or bool(self.keys_file)

    @property
    def host_names(self) -> frozenset[str]:
        """TOOLBRIDGE_ALLOWED_HOSTS, lowercased."""
        return frozenset(name.lower() for name in _items(self.allowed_hosts))

    @property
    def browser_origins(self) -> list[str]:
        """TOOLBRIDGE_CORS_ORIGINS as listed, without trailing slashes."""
        return [origin.rstrip("/") for origin in _items(self.cors_origins)]


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]
