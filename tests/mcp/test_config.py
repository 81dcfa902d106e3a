"""mcp.json loading: the accepted shapes, ${VAR} expansion, and errors that name file, server and field."""

import json
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
        ('{"other": {}}', "expected an object"),
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
