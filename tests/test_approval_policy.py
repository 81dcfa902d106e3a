"""Which tool calls ask first, as people see it: a real notes server over stdio (tests/support/mcp_servers/files.py:
read_note read-only, delete_note destructive, write_note unannotated) under TOOLBRIDGE_CONFIRM and mcp.json's
`confirm`, read from `GET`/`POST /tools`, the status page's `/ui/tools` and `toolbridge tools`."""

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import MODEL, FakeUpstream
from tests.test_cli import run_cli, write_config

NOTES = ("read_note", "delete_note", "write_note")


def notes(confirm: Any = None) -> dict[str, Any]:
    """The notes server's mcp.json entry, with `confirm` when given."""
    return stdio_entry("files.py") | ({} if confirm is None else {"confirm": confirm})


def asking(entries: list[dict[str, Any]]) -> dict[str, bool]:
    return {entry["function"]["name"]: entry["asks_first"] for entry in entries if not entry.get("client")}


def expected(**servers: tuple[bool, bool, bool]) -> dict[str, bool]:
    """`server=(read_note, delete_note, write_note)` as names with the server's prefix (the tests' setting)."""
    return {f"{server}__{tool}": asks for server, row in servers.items() for tool, asks in zip(NOTES, row, strict=True)}


@pytest.fixture(scope="module")
def careful(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """The default policy (destructive), and each kind of `confirm` a server can have."""
    servers = {"plain": notes(), "strict": notes(True), "lenient": notes(False), "listed": notes(["write_*"])}
    with running_gateway(tmp_path_factory.mktemp("careful"), servers, ready=tuple(servers),
                         upstream_url=f"{upstream.url}/v1") as gateway:
        yield gateway


def test_by_default_only_what_the_server_says_destroys_asks_and_confirm_wins(careful: Gateway) -> None:
    offered = httpx.get(f"{careful.url}/tools", timeout=30).json()["data"]
    assert asking(offered) == expected(
        plain=(False, True, False),  # destructiveHint: true asks; unannotated write_note does not
        strict=(True, True, True),
        lenient=(False, False, False),
        listed=(False, True, True),  # the glob, and the default for the rest
    )


def test_the_status_page_and_a_chat_bodys_offer_say_the_same(careful: Gateway) -> None:
    listed = asking(httpx.get(f"{careful.url}/tools", timeout=30).json()["data"])
    assert asking(httpx.get(f"{careful.url}/ui/tools", timeout=30).json()["data"]) == listed
    body = {"model": MODEL, "messages": [{"role": "user", "content": "delete my shopping note"}],
            "tools": [{"type": "function", "function": {"name": "mine", "parameters": {"type": "object"}}}]}
    answer = httpx.post(f"{careful.url}/tools", json=body, timeout=30).json()
    assert asking(answer["data"]) == listed
    clients = [entry for entry in answer["data"] if entry.get("client")]
    assert len(clients) == 1 and "asks_first" not in clients[0]  # the client's own tool: not ours to ask about


def test_writes_asks_before_every_tool_not_annotated_read_only(upstream: FakeUpstream, tmp_path: Path) -> None:
    servers = {"plain": notes(), "lenient": notes(False), "listed": notes(["read_*"])}
    with running_gateway(tmp_path, servers, ready=tuple(servers), upstream_url=f"{upstream.url}/v1",
                         confirm="writes") as gateway:
        offered = httpx.get(f"{gateway.url}/tools", timeout=30).json()["data"]
    assert asking(offered) == expected(plain=(False, True, True), lenient=(False, False, False),
                                       listed=(True, True, True))


def asks_on_stderr(result: subprocess.CompletedProcess[str]) -> list[str]:
    return sorted(line for line in result.stderr.splitlines() if "asks first" in line)


def test_toolbridge_tools_names_the_tools_that_ask_first(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"notes": notes(), "lenient": notes(False)})
    result = run_cli("tools", "--mcp-config", str(config), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert asks_on_stderr(result) == [
        "toolbridge: notes__delete_note (server 'notes') asks first: a call waits for the person's yes"]
    tools = json.loads(result.stdout)  # the JSON stays what the model is sent
    assert "asks_first" not in json.dumps(tools) and len(tools) == 6
    every = run_cli("tools", "--mcp-config", str(config), "--confirm", "all", cwd=tmp_path)
    assert [line.split()[1] for line in asks_on_stderr(every)] == [
        "notes__delete_note", "notes__read_note", "notes__write_note"]
    none = run_cli("tools", "--mcp-config", str(config), cwd=tmp_path, env={"TOOLBRIDGE_CONFIRM": "off"})
    assert none.returncode == 0 and asks_on_stderr(none) == []


def test_an_unknown_policy_is_one_line_naming_the_setting(tmp_path: Path) -> None:
    result = run_cli("tools", "--confirm", "sometimes", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "toolbridge: TOOLBRIDGE_CONFIRM (--confirm) = 'sometimes': "
        "Input should be 'off', 'destructive', 'writes' or 'all'"]


def test_a_bad_confirm_fails_only_its_server_and_says_why(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"notes": notes(), "typo": notes("yes")})
    result = run_cli("tools", "--mcp-config", str(config), cwd=tmp_path)
    assert result.returncode == 1  # a server failed
    assert [t["function"]["name"] for t in json.loads(result.stdout)] == ["read_note", "delete_note", "write_note"]
    assert ("server 'typo': field 'confirm': must be true, false, or a list of tool names and globs"
            in result.stderr)
