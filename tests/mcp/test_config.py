"""mcp.json loading: the accepted shapes, ${VAR} expansion, and errors that name file, server and field."""

import json
import re
from pathlib import Path

import pytest

from app.mcp.config import (
    HttpServerConfig,
    McpConfigError,
    StdioServerConfig,
    config_paths,
    load_mcp_config,
    load_mcp_configs,
)


def write(tmp_path: Path, content: object) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def test_stdio_and_http_entries_are_recognised(tmp_path: Path) -> None:
    path = write(tmp_path, {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "server-filesystem", "/tmp"], "env": {"A": "1"}, "cwd": "sub"},
        "remote": {"url": "https://example.test/mcp", "headers": {"Authorization": "Bearer x"}},
        "legacy": {"url": "http://127.0.0.1:9/sse", "type": "sse"},
        "copied": {"command": "uvx", "args": ["x"], "autoApprove": ["*"], "type": "stdio"},
    }})
    config = load_mcp_config(path)
    assert config.found and not config.problems
    files = config.servers["files"]
    assert isinstance(files, StdioServerConfig)
    assert files.args == ["-y", "server-filesystem", "/tmp"]
    assert files.env == {"A": "1"}
    assert files.cwd == str((tmp_path / "sub").resolve())
    remote = config.servers["remote"]
    assert isinstance(remote, HttpServerConfig)
    assert remote.headers == {"Authorization": "Bearer x"}
    assert not remote.is_legacy_sse
    assert config.servers["legacy"].is_legacy_sse  # type: ignore[union-attr]
    assert isinstance(config.servers["copied"], StdioServerConfig)


@pytest.mark.parametrize(
    ("value", "environ", "expected"),
    [
        ("${TOKEN}", {"TOKEN": "abc"}, "abc"),
        ("Bearer ${TOKEN}", {"TOKEN": "abc"}, "Bearer abc"),
        ("${MISSING:-fallback}", {}, "fallback"),
        ("${EMPTY:-fallback}", {"EMPTY": ""}, "fallback"),
        ("${SET:-fallback}", {"SET": "given"}, "given"),
        ("${A}-${B:-b}", {"A": "a"}, "a-b"),
        ("$NOT_EXPANDED", {}, "$NOT_EXPANDED"),
    ],
)
def test_variables_are_expanded(tmp_path: Path, value: str, environ: dict, expected: str) -> None:
    path = write(tmp_path, {"mcpServers": {"s": {"command": "run", "args": [value]}}})
    assert load_mcp_config(path, environ).servers["s"].args == [expected]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("entry", "fragments"),
    [
        ({"args": ["x"]}, ["server 's'", "needs either 'command'", "'url'"]),
        ({"command": ""}, ["server 's'", "field 'command'"]),
        ({"command": "x", "args": "not-a-list"}, ["server 's'", "field 'args'"]),
        ({"command": "x", "env": {"KEY": "${NOPE}"}}, ["server 's'", "field 'env.KEY'", "NOPE is not set"]),
        ({"url": "ftp://x"}, ["server 's'", "field 'url'"]),
        ({"url": "http://x", "type": "websocket"}, ["server 's'", "field 'type'"]),
        ("just a string", ["server 's'", "expected an object"]),
        # `confirm`: true, false or a list of names and globs; nothing pydantic's lax mode would turn into one.
        *(({"command": "x", "confirm": bad}, ["server 's'", "field 'confirm'", "must be true, false, or a list"])
          for bad in ("yes", "true", 1, 0, "write_*", ["write_*", 3], ["write_*", ""], {"write_*": True})),
    ],
)
def test_a_broken_entry_fails_only_that_server_and_says_where(
    tmp_path: Path, entry: object, fragments: list[str]
) -> None:
    path = write(tmp_path, {"mcpServers": {"s": entry, "good": {"command": "ok"}}})
    config = load_mcp_config(path, {})
    assert list(config.servers) == ["good"]
    message = config.problems["s"]
    assert message.startswith(str(path))
    for fragment in fragments:
        assert fragment in message


def test_confirm_is_true_false_or_a_list_of_names_and_globs(tmp_path: Path) -> None:
    path = write(tmp_path, {"mcpServers": {
        "all": {"command": "x", "confirm": True}, "none": {"command": "x", "confirm": False},
        "some": {"url": "http://x", "confirm": ["write_*", "delete_file"]}, "empty": {"command": "x", "confirm": []},
        "unset": {"command": "x"},
    }})
    config = load_mcp_config(path)
    assert not config.problems
    assert {name: server.confirm for name, server in config.servers.items()} == {
        "all": True, "none": False, "some": ["write_*", "delete_file"], "empty": [], "unset": None}


def test_disabled_servers_are_listed_but_not_run(tmp_path: Path) -> None:
    path = write(tmp_path, {"mcpServers": {"a": {"command": "x", "disabled": True}, "b": {"command": "y"}}})
    config = load_mcp_config(path)
    assert list(config.servers) == ["b"]
    assert config.disabled == ["a"]


def test_missing_file_is_an_empty_config(tmp_path: Path) -> None:
    config = load_mcp_config(tmp_path / "absent.json")
    assert not config.found
    assert config.servers == {}


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ('{"mcpServers": {', "not valid JSON (line 1"),
        ("[]", "expected an object"),
        ('{"other": {}}', 'unknown field "other"'),
        ('{"mcpServers": {}, "servers": {}}', 'both "mcpServers" and "servers"'),
        ('{"inputs": []}', "expected an object"),
    ],
)
def test_an_unusable_file_is_fatal_and_named(tmp_path: Path, content: str, fragment: str) -> None:
    path = write(tmp_path, content)
    with pytest.raises(McpConfigError) as caught:
        load_mcp_config(path)
    assert str(path) in str(caught.value)
    assert fragment in str(caught.value)


def test_vscode_servers_key_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, {"servers": {"a": {"command": "x"}}})
    assert list(load_mcp_config(path).servers) == ["a"]


def test_several_files_merge_and_later_files_win(tmp_path: Path) -> None:
    first = tmp_path / "a.json"
    first.write_text(json.dumps({"mcpServers": {"time": {"command": "old-time"}, "files": {"command": "fs"},
                                                "broken": {"args": []}}}))
    second = tmp_path / "b.json"
    second.write_text(json.dumps({"mcpServers": {"time": {"command": "new-time"}, "broken": {"command": "fixed"}}}))
    config = load_mcp_configs([first, second, tmp_path / "absent.json"])
    assert {name: s.command for name, s in config.servers.items()} == {  # type: ignore[union-attr]
        "time": "new-time", "files": "fs", "broken": "fixed"
    }
    assert config.problems == {}
    assert config.found
    assert config.files == [(first, True), (second, True), (tmp_path / "absent.json", False)]


def test_lmstudio_names_lm_studios_own_mcp_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    lmstudio = tmp_path / ".lmstudio" / "mcp.json"
    assert config_paths("lmstudio, ./mine.json") == [lmstudio, Path("mine.json")]
    lmstudio_cache = tmp_path / ".cache" / "lm-studio" / "mcp.json"
    lmstudio_cache.parent.mkdir(parents=True)
    lmstudio_cache.write_text("{}")
    assert config_paths("lmstudio") == [lmstudio_cache]  # the location that exists wins


def test_per_server_options_are_read(tmp_path: Path) -> None:
    path = write(tmp_path, {"mcpServers": {
        "slow": {"command": "npx", "timeout": 30, "connectTimeout": 120, "mode": "legacy",
                 "enabledTools": ["read"], "disabledTools": ["write"]},
        "plain": {"command": "uvx"},
    }})
    slow, plain = load_mcp_config(path).servers.values()
    assert (slow.confirm, plain.confirm) == (None, None)
    assert (slow.timeout, slow.connect_timeout, slow.mode) == (30, 120, "legacy")
    assert (slow.offers("read"), slow.offers("write"), slow.offers("other")) == (True, False, False)
    assert (plain.timeout, plain.connect_timeout, plain.mode, plain.offers("other")) == (None, None, "auto", True)


URL = "https://example.test/mcp"


@pytest.mark.parametrize(
    ("content", "said"),
    [
        # S3: a security field beside `oauth` instead of inside it, in either spelling.
        ({"mcpServers": {"protk": {"url": URL, "oauth": True, "per_key": True}}},
         'mcpServers.protk: unknown field "per_key" (did you mean "oauth.per_key"?)'),
        ({"servers": {"notes": {"url": URL, "oauth": {}, "perKey": True}}},
         'servers.notes: unknown field "perKey" (did you mean "oauth.per_key"?)'),
        ({"mcpServers": {"gh": {"url": URL, "scopes": ["repo"]}}},
         'mcpServers.gh: unknown field "scopes" (did you mean "oauth.scopes"?)'),
        # A misspelt `confirm` would leave the server's approvals off.
        ({"mcpServers": {"basic": {"command": "x", "confim": ["add"]}}},
         'mcpServers.basic: unknown field "confim" (did you mean "confirm"?)'),
        ({"mcpServers": {"off": {"command": "x", "disabled": True, "Confirm": True}}},  # disabled, checked all the same
         'mcpServers.off: unknown field "Confirm" (did you mean "confirm"?)'),
        ({"mcpServers": {"s": {"url": URL, "oauth": {"per-key": True}}}},
         'mcpServers.s.oauth: unknown field "per-key" (did you mean "per_key"?)'),
        ({"mcpServers": {"s": {"url": URL, "oauth": {"confirm": True}}}},
         'mcpServers.s.oauth: unknown field "confirm" (did you mean "confirm" beside "oauth"?)'),
        ({"mcpServers": {"s": {"url": URL, "oauth": {"authServerMetadataUrl": "https://a.test/x"}}}},
         'mcpServers.s.oauth: unknown field "authServerMetadataUrl" (Claude Code\'s; toolbridge names the '
         'authorization server with "issuer")'),
        ({"mcpServers": {"s": {"url": URL, "auth": {"client_id": "a"}}}},
         'mcpServers.s.auth: unknown field "client_id" (did you mean "CLIENT_ID"?)'),
        ({"mcpServers": {"s": {"command": "x", "connect_timeout": 5, "xyzzy": 1}}},
         'mcpServers.s: unknown field "xyzzy"'),
        ({"mcpServer": {"s": {"command": "x"}}}, 'unknown field "mcpServer" (did you mean "mcpServers"?)'),
        ({"mcpServers": {}, "command": "x"}, 'unknown field "command" (did you mean a server\'s "command"?)'),
        ({"mcpServers": {"a": {"command": "x", "tiemout": 1, "arg": []}, "b": {"url": URL, "header": {}}}},
         'mcpServers.a: unknown field "tiemout" (did you mean "timeout"?) (and 2 more unknown fields)'),
        ({"mcpServers": {"a": {"command": "x", "line\nbreak": 1}}}, 'mcpServers.a: unknown field "line\\nbreak"'),
    ],
)
def test_an_unknown_field_stops_the_file_naming_it_where_it_is_and_the_nearest_known(
    tmp_path: Path, content: dict, said: str
) -> None:
    path = write(tmp_path, content)
    with pytest.raises(McpConfigError) as caught:
        load_mcp_config(path, {})
    assert str(caught.value) == f"{path}: {said}"


def test_other_products_files_are_read_with_their_own_fields(tmp_path: Path) -> None:
    """Cline, Roo Code, Windsurf, Cursor, Claude Code, VS Code and Claude Desktop each write a few fields of their
    own; each is accepted, and read as ours where it means the same thing."""
    (tmp_path / "notes.env").write_text("LIBRARY_NOTES=5\nSHARED=from-file\n")
    path = write(tmp_path, {"globalShortcut": "Ctrl+Space", "inputs": [{"id": "key", "type": "promptString"}],
                            "servers": {
        "cline": {"command": "x", "disabled": False, "autoApprove": ["read"], "timeout": 30, "transportType": "stdio"},
        "cline_sse": {"url": URL, "transportType": "sse"},
        "roo": {"command": "x", "alwaysAllow": ["read"], "disabledTools": ["write"], "watchPaths": ["src/**"]},
        "windsurf": {"serverUrl": URL, "headers": {"X": "1"}},
        "cursor": {"url": URL, "auth": {"CLIENT_ID": "id", "CLIENT_SECRET": "secret", "scopes": ["repo"]}},
        "claude_code": {"type": "http", "url": URL, "headersHelper": "get-headers",
                        "oauth": {"clientId": "cc", "callbackPort": 8080, "scopes": "a b"}},
        "vscode": {"type": "stdio", "command": "x", "envFile": "notes.env", "env": {"SHARED": "from-env"},
                   "dev": {"watch": "${workspaceFolder}/**"}},
        "installed": {"type": "http", "url": URL, "gallery": "https://api.mcp.github.com", "version": "1.0.0"},
    }})
    config = load_mcp_config(path, {})
    assert not config.problems and not config.disabled
    s = config.servers
    assert (s["cline"].timeout, s["cline"].type) == (30, "stdio")
    assert s["cline_sse"].is_legacy_sse  # type: ignore[union-attr]
    assert not s["roo"].offers("write") and s["roo"].confirm is None  # an auto-approve list asks nothing less
    assert isinstance(s["windsurf"], HttpServerConfig) and s["windsurf"].url == URL
    cursor, claude = s["cursor"].oauth, s["claude_code"].oauth  # type: ignore[union-attr]
    assert cursor and (cursor.client_id, cursor.client_secret.get_secret_value(), cursor.scopes) == (  # type: ignore[union-attr]
        "id", "secret", ["repo"])
    assert claude and (claude.client_id, claude.scopes) == ("cc", ["a", "b"])
    assert s["vscode"].env == {"LIBRARY_NOTES": "5", "SHARED": "from-env"}  # type: ignore[union-attr]
    assert config.unused == {"cline": ["autoApprove"], "roo": ["alwaysAllow", "watchPaths"],
                             "claude_code": ["headersHelper", "oauth.callbackPort"], "vscode": ["dev"],
                             "installed": ["gallery", "version"]}


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        ({"url": URL, "serverUrl": URL}, "'serverUrl' and 'url' say the same thing: keep one"),
        ({"url": URL, "type": "sse", "transportType": "sse"}, "'transportType' and 'type' say the same thing"),
        ({"command": "x", "headers": {"A": "b"}}, "field 'headers' is not for stdio servers: it is for HTTP servers"),
        ({"url": URL, "cwd": "/tmp"}, "field 'cwd' is not for HTTP servers: it is for stdio servers ('command')"),
        ({"command": "x", "oauth": True}, "field 'oauth' is not for stdio servers"),
        ({"command": "x", "env": {"KEY": "${input:api-key}"}}, "field 'env.KEY': VS Code's ${input:...} prompts"),
        ({"command": "x", "envFile": "absent.env"}, "field 'envFile': "),
        ({"url": URL, "envFile": "notes.env"}, "field 'envFile' is for stdio servers"),
    ],
)
def test_other_products_fields_that_cannot_be_used_fail_only_their_server(
    tmp_path: Path, entry: dict, fragment: str
) -> None:
    path = write(tmp_path, {"mcpServers": {"s": entry, "good": {"command": "ok"}}})
    config = load_mcp_config(path, {})
    assert list(config.servers) == ["good"]
    assert fragment in config.problems["s"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [("Bearer ${env:TOKEN}", "Bearer abc"), ("${env:MISSING:-none}", "none"), ("${env:TOKEN}-${TOKEN}", "abc-abc")],
)
def test_cursors_env_variables_are_expanded_too(tmp_path: Path, value: str, expected: str) -> None:
    path = write(tmp_path, {"mcpServers": {"s": {"url": URL, "headers": {"Authorization": value}}}})
    assert load_mcp_config(path, {"TOKEN": "abc"}).servers["s"].headers == {  # type: ignore[union-attr]
        "Authorization": expected}


def test_a_disabled_entry_is_inert_even_when_its_variables_are_unset(tmp_path: Path) -> None:
    path = write(tmp_path, {"mcpServers": {"github": {"url": URL, "headers": {"A": "${GITHUB_TOKEN}"},
                                                      "disabled": True}}})
    config = load_mcp_config(path, {})
    assert (config.disabled, config.problems, config.servers) == (["github"], {}, {})


def test_an_env_file_is_read_relative_to_the_mcp_json_and_again_at_each_load(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    env_file = tmp_path / "conf" / "server.env"
    env_file.write_text("# a comment\nA=1\nexport B='two words'\n")
    path = tmp_path / "conf" / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"s": {"command": "x", "envFile": "server.env"}}}))
    assert load_mcp_config(path, {}).servers["s"].env == {"A": "1", "B": "two words"}  # type: ignore[union-attr]
    env_file.write_text("A=2\n")
    assert load_mcp_config(path, {}).servers["s"].env == {"A": "2"}  # type: ignore[union-attr]


def test_every_mcp_json_in_the_docs_passes_the_strict_check(tmp_path: Path) -> None:
    """The examples people copy: each whole mcp.json in a ```json block reads without an unknown field (unset ${VAR}s
    only fail their server)."""
    docs = Path(__file__).parents[2]
    blocks = [block for doc in [docs / "README.md", *(docs / "docs").glob("*.md")]
              for block in re.findall(r"```json\n(.*?)```", doc.read_text(), re.DOTALL)
              if block.startswith('{\n  "mcpServers"')]
    assert len(blocks) >= 4
    for number, block in enumerate(blocks):
        path = write(tmp_path, block)
        config = load_mcp_config(path, {})
        assert config.servers or config.disabled or config.problems, number
