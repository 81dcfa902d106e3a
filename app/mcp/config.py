"""mcp.json: the Cursor / Claude Desktop / LM Studio `{"mcpServers": {...}}` format (VS Code's `{"servers": ...}` too).

Every field is known or the file is refused (config_fields.py: ours, and other products' in the same format);
`${VAR}`s are expanded and `envFile`s read (config_values.py). A file that is not valid JSON or holds an unknown
field is fatal; a broken value only fails that server, with a message naming the file, the server and the field.
"""

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Self

import structlog
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from app.mcp.config_fields import adopted, ignored, spellings, unknown_fields
from app.mcp.config_values import EntryError, expand, with_env_file
from app.openai.wire import JSONObject

log = structlog.get_logger("toolbridge.mcp")
SERVER_KEYS = ("mcpServers", "servers")  # Claude Desktop's and most others'; VS Code's


class McpConfigError(Exception):
    """The config file cannot be used at all (unreadable, not JSON, wrong top-level shape, an unknown field)."""


class _ServerBase(BaseModel):
    # Unknown fields are refused before (config_fields.py); here, a field of the other kind of server.
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    disabled: bool = False
    timeout: PositiveFloat | None = Field(None, description="Seconds per tool call, overriding TOOL_TIMEOUT.")
    connect_timeout: PositiveFloat | None = Field(
        None, alias="connectTimeout", description="Seconds to connect and list tools, overriding MCP_CONNECT_TIMEOUT."
    )
    mode: Literal["auto", "legacy"] = Field(
        "auto", description="auto probes the 2026 protocol first; legacy goes straight to the 2025 handshake."
    )
    enabled_tools: list[str] | None = Field(None, alias="enabledTools", description="Offer only these tools.")
    disabled_tools: list[str] = Field(default_factory=list, alias="disabledTools", description="Never offer these.")
    confirm: bool | list[str] | None = Field(
        None, description="Which tools wait for the person's yes: true all, false none, or names and globs "
        "(the others as TOOLBRIDGE_CONFIRM says); absent: TOOLBRIDGE_CONFIRM (approval.py)."
    )

    @field_validator("confirm", mode="before")
    @classmethod
    def _confirm_shape(cls, value: object) -> object:
        # Strict: "yes" or 1 would pass as a bool in pydantic's lax mode, and a lone "write_*" as nothing useful.
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, list) and all(isinstance(item, str) and item for item in value):
            return value
        raise ValueError('must be true, false, or a list of tool names and globs such as ["write_*", "delete_file"]')

    def offers(self, tool: str) -> bool:
        """Whether mcp.json lets this tool be offered (mcpo's disabledTools, ollama-mcp-bridge's filter)."""
        if tool in self.disabled_tools:
            return False
        return self.enabled_tools is None or tool in self.enabled_tools


class StdioServerConfig(_ServerBase):
    type: Literal["stdio"] | None = None
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None


class OAuthConfig(BaseModel):
    """How the gateway signs in to a server that asks for OAuth (app/mcp/server_auth.py)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    grant: Literal["authorization_code", "client_credentials"] = Field(
        "authorization_code", description="authorization_code: a person signs in from the status page; "
        "client_credentials: the gateway signs in as itself (machine to machine), with client_id and client_secret."
    )
    scopes: list[str] | None = Field(None, description="Scopes to ask for; absent: what the server says it needs.")
    client_id: str | None = Field(None, alias="clientId", min_length=1,
                                  description="A client registered beforehand (GitHub); absent: dynamic registration.")
    client_secret: SecretStr | None = Field(None, alias="clientSecret", min_length=1)
    issuer: str | None = Field(None, pattern=r"^https?://", description="The authorization server the client is "
                               "registered with: its credentials are sent to no other, whatever the MCP server names.")
    per_key: bool = Field(False, alias="perKey", description="Each client key signs in as itself (its own "
                          "identity and connection); false: one identity for the whole gateway.")

    @field_validator("scopes", mode="before")
    @classmethod
    def _scopes_shape(cls, value: object) -> object:
        return value.split() if isinstance(value, str) else value  # "repo read:org", as OAuth writes scopes

    @model_validator(mode="after")
    def _complete(self) -> Self:
        if self.grant == "client_credentials" and not (self.client_id and self.client_secret):
            raise ValueError("the client_credentials grant needs client_id and client_secret")
        if self.client_secret and not self.client_id:
            raise ValueError("client_secret without client_id")
        if self.per_key and self.grant == "client_credentials":
            raise ValueError("per_key needs people who sign in: not with the client_credentials grant")
        return self

    @property
    def scope(self) -> str | None:
        return " ".join(self.scopes) if self.scopes else None


class HttpServerConfig(_ServerBase):
    type: Literal["http", "streamable-http", "streamable_http", "streamableHttp", "sse"] | None = None
    url: str = Field(pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    oauth: OAuthConfig | None = Field(
        None, description="The server asks for OAuth: true, or how to sign in. A server answering 401 with a "
        "Bearer challenge is taken as `true` when no Authorization header is configured."
    )

    @field_validator("oauth", mode="before")
    @classmethod
    def _oauth_shape(cls, value: object) -> object:
        if value is True:
            return {}
        if value is False:
            return None
        return value

    @property
    def is_legacy_sse(self) -> bool:
        return self.type == "sse"


ServerConfig = StdioServerConfig | HttpServerConfig


@dataclass
class McpConfig:
    """What the gateway will run: valid servers, broken entries with their reason, and disabled names."""

    path: Path
    found: bool
    servers: dict[str, ServerConfig] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)
    disabled: list[str] = field(default_factory=list)
    files: list[tuple[Path, bool]] = field(default_factory=list)
    unused: dict[str, list[str]] = field(default_factory=dict)  # other products' fields, accepted and not used


# Where LM Studio keeps its mcp.json (the word `lmstudio` in TOOLBRIDGE_MCP_CONFIG stands for it).
LMSTUDIO_CONFIGS = (Path("~/.lmstudio/mcp.json"), Path("~/.cache/lm-studio/mcp.json"))


def config_paths(setting: str) -> list[Path]:
    """The files named by TOOLBRIDGE_MCP_CONFIG: comma-separated; `lmstudio` is LM Studio's own mcp.json."""
    paths: list[Path] = []
    for part in (p.strip() for p in setting.split(",")):
        if part.lower() == "lmstudio":
            found = [p.expanduser() for p in LMSTUDIO_CONFIGS if p.expanduser().exists()]
            paths.append(found[0] if found else LMSTUDIO_CONFIGS[0].expanduser())
        elif part:
            paths.append(Path(part).expanduser())
    return paths


def load_mcp_configs(paths: list[Path], environ: Mapping[str, str] | None = None) -> McpConfig:
    """Several mcp.json files as one; a server named in a later file replaces the earlier one.

    Raises:
        McpConfigError: one of the files cannot be read or is not a JSON object of servers.
    """
    merged = McpConfig(path=paths[0] if paths else Path("mcp.json"), found=False)
    for path in paths:
        config = load_mcp_config(path, environ)
        merged.files.append((path, config.found))
        merged.found = merged.found or config.found
        for name in (*config.servers, *config.problems, *config.disabled):
            merged.servers.pop(name, None)
            merged.problems.pop(name, None)
            merged.unused.pop(name, None)
            if name in merged.disabled:
                merged.disabled.remove(name)
        merged.servers.update(config.servers)
        merged.problems.update(config.problems)
        merged.unused.update(config.unused)
        merged.disabled.extend(config.disabled)
    return merged


def load_mcp_config(path: Path, environ: Mapping[str, str] | None = None) -> McpConfig:
    """Reads and validates an mcp.json. A missing file is an empty config, not an error.

    Raises:
        McpConfigError: the file cannot be read, is not a JSON object of servers, or holds an unknown field.
    """
    environ = os.environ if environ is None else environ
    if not path.exists():
        return McpConfig(path=path, found=False, files=[(path, False)])
    config = McpConfig(path=path, found=True, files=[(path, True)])
    for name, entry in _entries(path).items():
        try:
            if not isinstance(entry, dict):
                raise EntryError("expected an object with 'command' (stdio) or 'url' (HTTP)")
            # A disabled entry is inert: its ${VAR}s need not be set.
            server = None if entry.get("disabled") is True else _parse_server(entry, environ, base_dir=path.parent)
        except EntryError as exc:
            config.problems[name] = f"{path}: server '{name}': {exc}"
            continue
        if server is None or server.disabled:
            config.disabled.append(name)
            continue
        config.servers[name] = server
        config.unused.update({name: unused} if (unused := ignored(entry)) else {})
    return config


def _entries(path: Path) -> JSONObject:
    """The server entries of a file whose every field is known."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise McpConfigError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from exc
    except UnicodeDecodeError as exc:
        raise McpConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from exc
    except OSError as exc:
        raise McpConfigError(f"{path}: cannot be read: {exc.strerror}") from exc
    if not isinstance(raw, dict):
        raise McpConfigError(f'{path}: expected an object like {{"mcpServers": {{"name": {{...}}}}}}')
    if unknown := unknown_fields(raw, _OWN_FIELDS):
        more = f" (and {len(unknown) - 1} more unknown field{'s' if len(unknown) > 2 else ''})" if unknown[1:] else ""
        raise McpConfigError(f"{path}: {unknown[0]}{more}")
    named = [key for key in SERVER_KEYS if key in raw]
    if len(named) > 1:
        raise McpConfigError(f'{path}: both "mcpServers" and "servers": keep one')
    entries = raw.get(named[0]) if named else None
    if not isinstance(entries, dict):
        raise McpConfigError(f'{path}: expected an object like {{"mcpServers": {{"name": {{...}}}}}}')
    return entries


def _parse_server(entry: JSONObject, environ: Mapping[str, str], *, base_dir: Path) -> ServerConfig:
    try:
        ours = adopted(entry)
    except ValueError as exc:
        raise EntryError(str(exc)) from exc
    expanded = with_env_file(expand(ours, environ), base_dir)
    model: type[ServerConfig]
    if "command" in expanded:
        model = StdioServerConfig
    elif "url" in expanded:
        model = HttpServerConfig
    else:
        raise EntryError("needs either 'command' (a stdio server) or 'url' (an HTTP server)")
    try:
        server = model.model_validate(expanded)
    except ValidationError as exc:
        raise EntryError(_first_problem(exc, model)) from exc
    if isinstance(server, StdioServerConfig) and server.cwd and not Path(server.cwd).is_absolute():
        server.cwd = str((base_dir / server.cwd).resolve())
    return server


def _first_problem(exc: ValidationError, model: type[ServerConfig]) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "(entry)"
    if first["type"] == "extra_forbidden" and len(first["loc"]) == 1:  # known, but for the other kind of server
        kind, other = ("stdio", "HTTP servers ('url')") if model is StdioServerConfig else (
            "HTTP", "stdio servers ('command')")
        return f"field '{where}' is not for {kind} servers: it is for {other}"
    return f"field '{where}': {first['msg'].removeprefix('Value error, ')}"


_OWN_FIELDS = {
    "top": SERVER_KEYS,
    "server": list(dict.fromkeys(spellings(StdioServerConfig) + spellings(HttpServerConfig))),
    "oauth": spellings(OAuthConfig, alias_first=False),
}


def log_config(config: McpConfig) -> None:
    """What a loaded config says to the operator beyond its servers: entries that fail, fields it does not use."""
    for name, problem in config.problems.items():
        log.error("mcp_server_config_invalid", server=name, error=problem)
    for name, fields in config.unused.items():
        log.info("mcp_config_fields_unused", server=name, fields=fields, note="other products' fields; see "
                 "docs/configuration.md")
    if not config.found:
        paths = [str(path) for path, _ in config.files] or [str(config.path)]
        log.warning("mcp_config_missing", paths=paths, effect="no MCP tools")
