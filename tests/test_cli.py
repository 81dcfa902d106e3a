"""The `toolbridge` command as a user runs it: printing tools, serving, and stopping cleanly."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import psutil
import pytest

from tests.conftest import BASIC_TOOLS, servers_ready, stdio_entry, wait_for_health
from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.support.servers import free_port

TOOLBRIDGE = str(Path(sys.executable).parent / "toolbridge")
EXIT_TIMEOUT = 30


def write_config(tmp_path: Path, servers: dict) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("TOOLBRIDGE_")}


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TOOLBRIDGE, *args], capture_output=True, text=True, timeout=120, cwd=cwd,
        env=clean_env() | {"XDG_DATA_HOME": str(cwd / "data")} | (env or {}),
        check=False,
    )


@contextlib.contextmanager
def toolbridge(
    tmp_path: Path, config: Path, *flags: str, env: dict[str, str] | None = None, ready: Any = None,
    key: str | None = None,
) -> Iterator[tuple[subprocess.Popen, str]]:
    """`toolbridge` started as a user starts it, its log in tmp_path/gateway.log; yields the process and its
    URL once /health satisfies `ready` (default: it answers). Stopped at the end as a supervisor stops it
    (SIGTERM, then SIGKILL), however the test ended."""
    port = free_port()
    # The default memory file goes to the user's data directory: here, the test's own.
    env = {"XDG_DATA_HOME": str(tmp_path / "data")} | (env or clean_env())
    with (tmp_path / "gateway.log").open("a") as log_file:
        gateway = subprocess.Popen([TOOLBRIDGE, "--port", str(port), "--mcp-config", str(config), *flags],
                                   cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=log_file)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(base, ready or (lambda body: "status" in body), key=key)
        yield gateway, base
    finally:
        if gateway.poll() is None:
            gateway.send_signal(signal.SIGTERM)
            try:
                gateway.wait(timeout=EXIT_TIMEOUT)
            except subprocess.TimeoutExpired:
                gateway.kill()
                gateway.wait(timeout=EXIT_TIMEOUT)


def test_tools_prints_the_openai_tools_and_exits(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"basic": stdio_entry("basic.py")})
    result = run_cli("tools", "--mcp-config", str(config), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    tools = json.loads(result.stdout)
    assert [t["function"]["name"] for t in tools] == BASIC_TOOLS
    assert all(t["type"] == "function" and t["function"]["parameters"]["type"] == "object" for t in tools)


def test_tools_piped_into_a_reader_that_stops_early_ends_without_a_traceback(tmp_path: Path) -> None:
    """`toolbridge tools | head -1`: the reader closes the pipe after a line."""
    config = write_config(tmp_path, {"basic": stdio_entry("basic.py")})
    reader, writer = os.pipe()
    os.close(reader)  # nobody reads: the first write is refused, as `head` refuses it once it has its lines
    with os.fdopen(writer, "wb") as closed:
        done = subprocess.run([TOOLBRIDGE, "tools", "--mcp-config", str(config)], cwd=tmp_path, stdout=closed,
                              stderr=subprocess.PIPE, text=True, timeout=120, check=False,
                              env=clean_env() | {"XDG_DATA_HOME": str(tmp_path / "data")})
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.returncode == 0


def test_tools_names_failed_servers_and_exits_nonzero(tmp_path: Path) -> None:
    config = write_config(
        tmp_path, {"basic": stdio_entry("basic.py"), "broken": {"command": "no-such-mcp-server-binary"}}
    )
    result = run_cli("tools", "--mcp-config", str(config), cwd=tmp_path)
    assert result.returncode == 1
    assert len(json.loads(result.stdout)) == len(BASIC_TOOLS)
    assert "'broken' failed" in result.stderr
    assert "command not found: no-such-mcp-server-binary" in result.stderr


def test_a_tool_list_nested_too_deep_to_read_fails_the_start_at_once_saying_so(tmp_path: Path) -> None:
    """The SDK drops an answer it cannot parse: the start used to wait out its whole connect timeout."""
    config = write_config(tmp_path, {"deep": stdio_entry("too_deep.py") | {"connectTimeout": 30}})
    result = run_cli("tools", "--mcp-config", str(config), cwd=tmp_path)
    assert result.returncode == 1
    assert "'deep' failed: sent a message nested deeper than the MCP SDK can read" in result.stderr


def test_broken_json_config_is_a_clear_error(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {"a": {"command": "x",}}}')
    result = run_cli("--mcp-config", str(config), cwd=tmp_path)
    assert result.returncode == 2
    assert str(config) in result.stderr
    assert "line 1" in result.stderr


def test_settings_come_from_environment_and_dotenv(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"basic": stdio_entry("basic.py")})
    (tmp_path / ".env").write_text(f"TOOLBRIDGE_MCP_CONFIG={config}\n")
    result = run_cli("tools", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)) == len(BASIC_TOOLS)


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_stopping_leaves_no_mcp_server_process_behind(tmp_path: Path, stop_signal: signal.Signals) -> None:
    config = write_config(tmp_path, {"one": stdio_entry("basic.py"), "two": stdio_entry("lingering.py")})
    with toolbridge(tmp_path, config, "--log-format", "json", ready=servers_ready("one", "two")) as (gateway, _):
        children = psutil.Process(gateway.pid).children(recursive=True)
        assert len(children) >= 2
        gateway.send_signal(stop_signal)
        # uvicorn shuts down gracefully, then re-raises the signal so the exit status tells of it.
        assert gateway.wait(timeout=EXIT_TIMEOUT) in (0, -stop_signal)
        assert "Application shutdown complete" in (tmp_path / "gateway.log").read_text()
        _, alive = psutil.wait_procs(children, timeout=5)
        assert alive == []
        # Its port closed as it exited. The test used to ask the port again: another worker's server, given the
        # freed port meanwhile, answered it once in CI (2026-11-29).


@pytest.mark.parametrize("log_format", ["json", "console"])
def test_logs_carry_request_tool_and_stderr_lines_but_no_secrets(
    tmp_path: Path, upstream: FakeUpstream, log_format: str
) -> None:
    config = write_config(tmp_path, {"basic": stdio_entry("basic.py"), "broken": stdio_entry("crash_on_start.py")})
    secrets = {"TOOLBRIDGE_UPSTREAM_API_KEY": "sk-upstream-CANARY-1", "TOOLBRIDGE_API_KEYS": "sk-client-CANARY-2"}
    env = clean_env() | secrets | {"TOOLBRIDGE_UPSTREAM_URL": f"{upstream.url}/v1"}
    flags = ("--log-format", log_format, "--log-level", "debug")
    with toolbridge(tmp_path, config, *flags, env=env, ready=lambda b: b["servers"]["basic"]["state"] == "ready",
                    key="sk-client-CANARY-2") as (_gateway, base):
        key = {"Authorization": "Bearer sk-client-CANARY-2"}
        upstream.script(Turn(calls=[Call("echo", {"text": "x"})]), Turn(content="done"))
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="sk-client-CANARY-2", max_retries=0)
        assert client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        upstream.script(Turn(content="ZQXWV"))  # one fragment: the fake streams 5 characters a chunk
        streamed = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == "ZQXWV"
        wrong = openai.OpenAI(base_url=f"{base}/v1", api_key="sk-wrong-CANARY-3", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            wrong.models.list()
        # The audit's bad requests, each of which wrote keys or tracebacks into the log.
        bad_requests = [
            httpx.post(f"{base}/v1/chat/completions", headers=key | {"Content-Type": "application/json"},
                       content=b'{"model": "m", "messages": [{"role": "user", "content": "\\ud800"}]}'),
            httpx.post(f"{base}/v1/chat/completions", headers=key | {"Content-Type": "application/json"},
                       content=b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": NaN}'),
            httpx.get(f"{base}/v1/%00", headers=key),
            httpx.get(f"{base}/v1/embeddings?api_key=sk-query-CANARY-4", headers=key | {"X-Api-Key": "CANARY-5"}),
            httpx.get(f"{base}/health", headers={"Host": "evil.example", "Authorization": "Bearer CANARY-6"}),
        ]
        assert [r.status_code for r in bad_requests] == [400, 400, 400, 405, 403]
    text = (tmp_path / "gateway.log").read_text()
    for canary in ("CANARY-1", "CANARY-2", "CANARY-3", "CANARY-4", "CANARY-5", "CANARY-6"):
        assert canary not in text
    assert "Traceback" not in text
    assert "ZQXWV" not in text  # at debug, sse-starlette would log every chunk it sends
    if log_format == "console":
        assert "mcp_server_stderr" in text and "GITHUB_TOKEN" in text
        assert "tool_call" in text and "tool=echo" in text
        return
    events = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    assert any(
        e["event"] == "mcp_server_stderr" and e["server"] == "broken" and "GITHUB_TOKEN" in e["line"] for e in events
    )
    assert any(
        e["event"] == "tool_call" and e["server"] == "basic" and e["tool"] == "echo" and e["ok"] is True
        and e["duration_ms"] >= 0 for e in events
    )
    requests = [e for e in events if e["event"] == "request" and e["path"] == "/v1/chat/completions"]
    assert [(r["status"], r.get("rounds"), r.get("tools_called")) for r in requests] == [
        (200, 2, ["echo"]), (200, 1, []), (400, None, None), (400, None, None)
    ]


LOG_AN_ERROR = """
import structlog
from app.logging import configure_logging
configure_logging("{log_format}", "info", secrets=["sk-SETTING-CANARY"])
def fail():
    local_secret = "LOCAL-CANARY " * 5000
    raise RuntimeError("boom with sk-SETTING-CANARY and Authorization: Bearer sk-HEADER-CANARY")
try:
    fail()
except RuntimeError:
    structlog.get_logger("test").exception("unhandled_error", note="x" * 100_000)
"""


@pytest.mark.parametrize("log_format", ["json", "console"])
def test_an_error_is_logged_as_a_bounded_plain_traceback_without_locals_or_secrets(log_format: str) -> None:
    """`rich` is installed here (the dev extra brings it): structlog's console renderer would use it and print
    every frame's locals, thousands of lines on the event loop."""
    script = LOG_AN_ERROR.format(log_format=log_format)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert "boom" in result.stderr and "Traceback" in result.stderr
    for canary in ("LOCAL-CANARY", "SETTING-CANARY", "HEADER-CANARY"):
        assert canary not in result.stderr
    assert len(result.stderr) < 20_000
    assert len(result.stderr.splitlines()) < 40


LOG_AT_EACH_LEVEL = """
import logging, structlog
from app.logging import configure_logging
configure_logging("json", "{level}")
ours, theirs = structlog.get_logger("toolbridge.test"), logging.getLogger("mcp.test")
for name in ("debug", "info", "warning"):
    getattr(ours, name)("ours_" + name)
    getattr(theirs, name)("theirs_" + name)
"""


@pytest.mark.parametrize(("level", "written"), [
    ("debug", {"debug", "info", "warning"}), ("info", {"info", "warning"}), ("warning", {"warning"}),
])
def test_the_level_drops_the_gateways_lines_and_the_libraries_alike(level: str, written: set[str]) -> None:
    """The gateway's own lines are written straight to stderr, the libraries' through stdlib logging: one level."""
    script = LOG_AT_EACH_LEVEL.format(level=level)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    lines = [json.loads(line) for line in result.stderr.splitlines()]
    assert sorted(line["event"] for line in lines) == sorted(f"{who}_{name}" for who in ("ours", "theirs")
                                                            for name in written)
    assert all(line["level"] == line["event"].split("_")[1] and line["timestamp"].endswith("Z") for line in lines)


LOG_TO_A_GONE_READER = """
import logging, os, structlog
from app.logging import configure_logging
configure_logging("{log_format}", "info")
reader, writer = os.pipe()
os.close(reader)
os.dup2(writer, 2)  # stderr: a pipe whose reader is gone, as when whatever read the gateway's log died
structlog.get_logger("toolbridge.http").info("request", status=200)
structlog.get_logger("toolbridge.http").exception("stream_crashed")
logging.getLogger("mcp.test").warning("a library's line")
print("went on", flush=True)
"""


@pytest.mark.parametrize("log_format", ["json", "console"])
def test_a_line_that_cannot_be_written_is_dropped_and_the_gateway_goes_on(log_format: str) -> None:
    script = LOG_TO_A_GONE_READER.format(log_format=log_format)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.stdout == "went on\n", result.stdout + result.stderr


@pytest.mark.parametrize(
    ("env", "args", "expected"),
    [
        ({"TOOLBRIDGE_PORT": "abc"}, [], "TOOLBRIDGE_PORT (--port) = 'abc': Input should be a valid integer"),
        ({}, ["--port", "70000"], "TOOLBRIDGE_PORT (--port) = '70000': Input should be less than or equal to 65535"),
        ({"TOOLBRIDGE_TOOL_TRACE": "loud"}, [], "TOOLBRIDGE_TOOL_TRACE (--tool-trace) = 'loud': Input should be"),
        ({"TOOLBRIDGE_API_KEYS": " , "}, [], "TOOLBRIDGE_API_KEYS (--api-keys) = (hidden): lists no key"),
        ({"TOOLBRIDGE_UPSTREAM_URL": "not a url"}, [], "TOOLBRIDGE_UPSTREAM_URL (--upstream-url) = 'not a url'"),
        ({"TOOLBRIDGE_TOKEN_KEY": "hunter2"}, [], "TOOLBRIDGE_TOKEN_KEY (--token-key) = (hidden): is not a Fernet key"),
        ({"TOOLBRIDGE_STATE_URL": "redis://:hunter2@127.0.0.1:9/0"}, [],
         "TOOLBRIDGE_TOKEN_KEY must be set when TOOLBRIDGE_STATE_URL is redis://: replicas share"),
        ({"TOOLBRIDGE_STATE_URL": "postgres://user:hunter2@db/x"}, [],
         "TOOLBRIDGE_STATE_URL (--state-url) = 'postgres://db/x': must be sqlite:///PATH, redis://HOST:PORT/DB, "
         "memory:// or none; got 'db/x'"),
    ],
)
def test_a_bad_setting_is_one_line_and_exit_2(tmp_path: Path, env: dict, args: list, expected: str) -> None:
    result = run_cli(*args, cwd=tmp_path, env=env)
    assert result.returncode == 2
    assert result.stderr.startswith(f"toolbridge: {expected}"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(("env", "args"), [({}, ["--workers", "4"]), ({}, ["--workers=4"]),
                                           ({"TOOLBRIDGE_WORKERS": "4"}, [])])
def test_asking_for_workers_says_why_there_is_one_process_and_what_to_do(
    tmp_path: Path, env: dict, args: list
) -> None:
    result = run_cli(*args, cwd=tmp_path, env=env)
    assert result.returncode == 2
    assert result.stderr.startswith("toolbridge: --workers is not supported, toolbridge runs as one"), result.stderr
    assert "replicas behind a proxy" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_an_mcp_json_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_bytes(b'{"mcpServers": {"caf\xe9": {"command": "x"}}}')
    for command in (["tools"], []):
        result = run_cli(*command, "--mcp-config", str(config), cwd=tmp_path)
        assert result.returncode == 2
        assert result.stderr.strip() == f"toolbridge: {config}: not UTF-8 text (byte 20); save it as UTF-8"


def test_slow_or_huge_request_heads_are_refused(tmp_path: Path) -> None:
    with toolbridge(tmp_path, tmp_path / "none.json", "--client-timeout", "1") as (_gateway, base):
        port = int(base.rsplit(":", 1)[1])

        def answer(head: bytes) -> bytes:
            with socket.create_connection(("127.0.0.1", port), timeout=EXIT_TIMEOUT) as sock:
                with contextlib.suppress(ConnectionResetError, BrokenPipeError):
                    sock.sendall(head)
                return sock.recv(4096)

        huge = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 1_000_000 + b"\r\n\r\n"
        assert answer(huge).startswith(b"HTTP/1.1 431 ")
        for unfinished in (b"", b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"):
            started = time.monotonic()
            refused = answer(unfinished)
            assert refused.startswith(b"HTTP/1.1 408 ")
            assert b'"code": "request_timeout"' in refused
            assert time.monotonic() - started < EXIT_TIMEOUT
        assert answer(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").startswith(b"HTTP/1.1 200 ")
        # A large body sent in the same write as its head is body, not head.
        body = b"x" * 1_000_000
        sent_at_once = (b"POST /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        b"Content-Length: %d\r\n\r\n" % len(body) + body)
        assert answer(sent_at_once).startswith(b"HTTP/1.1 405 ")


def test_a_port_in_use_fails_before_any_mcp_server_starts(tmp_path: Path) -> None:
    started = tmp_path / "started"
    config = write_config(tmp_path, {"marker": {"command": "sh", "args": ["-c", f"touch {started}; sleep 30"]}})
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        result = run_cli("--port", str(taken.getsockname()[1]), "--mcp-config", str(config), cwd=tmp_path)
    assert result.returncode != 0
    assert "address already in use" in result.stderr.lower()
    assert not started.exists()


def test_by_default_tools_keep_their_own_names_unless_two_servers_share_one(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"basic": stdio_entry("basic.py"), "time": {"command": "mcp-server-time"},
                                     "clock": {"command": "mcp-server-time"}})
    result = run_cli("tools", "--mcp-config", str(config), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    names = [t["function"]["name"] for t in json.loads(result.stdout)]
    assert names[: len(BASIC_TOOLS)] == BASIC_TOOLS
    assert {"time__get_current_time", "clock__get_current_time"} <= set(names) and "get_current_time" not in names


def test_tools_honours_the_prefix_and_profile_settings(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"basic": stdio_entry("basic.py")})
    result = run_cli("tools", "--mcp-config", str(config), "--tool-prefix", "always",
                     "--schema-profile", "passthrough", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    tools = json.loads(result.stdout)
    assert [t["function"]["name"] for t in tools] == [f"basic__{name}" for name in BASIC_TOOLS]
    rendezvous = next(t for t in tools if t["function"]["name"] == "basic__rendezvous")["function"]["parameters"]
    assert rendezvous["properties"]["wait_seconds"]["default"] == 10.0  # passthrough keeps what grammar-safe moves


def test_lm_studio_users_existing_servers_are_offered(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".lmstudio").mkdir(parents=True)
    (home / ".lmstudio" / "mcp.json").write_text(json.dumps({"mcpServers": {"basic": stdio_entry("basic.py")}}))
    extra = write_config(tmp_path, {"more": stdio_entry("basic.py")})
    result = subprocess.run(
        [TOOLBRIDGE, "tools", "--mcp-config", f"lmstudio,{extra}"], capture_output=True, text=True, timeout=120,
        cwd=tmp_path, env=clean_env() | {"HOME": str(home)}, check=False,
    )
    assert result.returncode == 0, result.stderr
    names = [t["function"]["name"] for t in json.loads(result.stdout)]
    assert names == [f"basic__{n}" for n in BASIC_TOOLS] + [f"more__{n}" for n in BASIC_TOOLS]


def test_a_killed_server_is_healed_without_user_action(tmp_path: Path, upstream: FakeUpstream) -> None:
    config = write_config(tmp_path, {"time": {"command": "mcp-server-time"}, "broken": {"command": "no-such-binary"}})
    env = clean_env() | {"TOOLBRIDGE_UPSTREAM_URL": f"{upstream.url}/v1"}
    with toolbridge(tmp_path, config, env=env, ready=lambda b: b["servers"]["time"]["state"] == "ready") as (
        gateway, base
    ):
        children = psutil.Process(gateway.pid).children(recursive=True)
        [server] = [c for c in children if "mcp-server-time" in " ".join(c.cmdline())]
        server.kill()
        healed = wait_for_health(base, lambda b: b["servers"]["time"].get("restarts") == 1
                                 and b["servers"]["time"]["state"] == "ready")
        assert healed["servers"]["broken"]["state"] == "failed"
        upstream.script(Turn(calls=[Call("get_current_time", {"timezone": "UTC"})]), Turn(content="done"))
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "time?"}])
        assert json.loads(upstream.chat_requests()[1]["messages"][-1]["content"])["status"] == "success"


def test_memory_outlives_a_restart_in_the_user_data_directory(tmp_path: Path, upstream: FakeUpstream) -> None:
    config = write_config(tmp_path, {"time": {"command": "mcp-server-time"}})
    env = clean_env() | {"TOOLBRIDGE_UPSTREAM_URL": f"{upstream.url}/v1"}
    question = {"role": "user", "content": "What time is it in UTC? (restart)"}
    ready = lambda b: b["servers"]["time"]["state"] == "ready"  # noqa: E731
    with toolbridge(tmp_path, config, env=env, ready=ready) as (_, base):
        upstream.script(Turn(calls=[Call("get_current_time", {"timezone": "UTC"})]), Turn(content="It is noon."))
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
        answer = client.chat.completions.create(model="m", messages=[question]).choices[0].message.content
        call, result = upstream.chat_requests()[1]["messages"][-2:]
    with toolbridge(tmp_path, config, env=env, ready=ready) as (_, base):
        upstream.script(Turn(content="noon"))
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
        later = {"role": "user", "content": "What did the tool return?"}
        client.chat.completions.create(model="m", messages=[question, {"role": "assistant", "content": answer}, later])
    sent = [m for m in upstream.chat_requests()[0]["messages"] if m["role"] != "system"]
    assert sent == [question, call, result, {"role": "assistant", "content": "It is noon."}, later]
    state = tmp_path / "data" / "toolbridge" / "state.db"  # XDG_DATA_HOME/toolbridge
    assert oct(state.stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("trigger", ["sighup", "watch"])
def test_config_changes_are_applied_without_a_restart(tmp_path: Path, trigger: str) -> None:
    config = write_config(tmp_path, {"one": stdio_entry("basic.py", "one"), "kept": stdio_entry("basic.py", "kept")})
    flags = ["--watch-config"] if trigger == "watch" else []
    with toolbridge(tmp_path, config, *flags, ready=servers_ready("one", "kept")) as (gateway, base):
        kept_pid = _server_pid(gateway.pid, "kept")
        one = psutil.Process(_server_pid(gateway.pid, "one"))
        write_config(tmp_path, {"kept": stdio_entry("basic.py", "kept"), "two": stdio_entry("basic.py", "two")})
        if trigger == "sighup":
            gateway.send_signal(signal.SIGHUP)
        body = wait_for_health(base, lambda b: set(b["servers"]) == {"kept", "two"} and servers_ready("kept", "two")(b))
        assert body["tools"] == 2 * len(BASIC_TOOLS)
        assert _server_pid(gateway.pid, "kept") == kept_pid  # unchanged servers keep running
        _, alive = psutil.wait_procs([one], timeout=10)
        assert alive == []


def _server_pid(gateway_pid: int, tag: str) -> int:
    """The pid of the test server started for the mcp.json entry whose last argument is `tag`."""
    for child in psutil.Process(gateway_pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if child.cmdline()[-1] == tag:
                return child.pid
    raise AssertionError(f"no server process for {tag}")


def test_helpers_a_server_leaves_behind_are_ended_at_shutdown(tmp_path: Path) -> None:
    helper_file = tmp_path / "helper.pid"
    config = write_config(tmp_path, {"spawner": stdio_entry("spawner.py", str(helper_file))})
    try:
        with toolbridge(tmp_path, config, ready=servers_ready("spawner")) as (gateway, _base):
            helper = psutil.Process(int(helper_file.read_text()))
            assert helper.is_running()
            gateway.send_signal(signal.SIGTERM)
            gateway.wait(timeout=EXIT_TIMEOUT)
            _, alive = psutil.wait_procs([helper], timeout=5)
            assert alive == []
    finally:
        with contextlib.suppress(psutil.Error, FileNotFoundError, ValueError):
            psutil.Process(int(helper_file.read_text())).kill()


@contextlib.contextmanager
def serving(tmp_path: Path, upstream: FakeUpstream, **settings: str) -> Iterator[tuple[subprocess.Popen, str]]:
    """`toolbridge` with basic.py and the fake upstream; yields the process and its URL once it is ready."""
    config = write_config(tmp_path, {"basic": stdio_entry("basic.py")})
    env = clean_env() | {"TOOLBRIDGE_UPSTREAM_URL": f"{upstream.url}/v1"} | settings
    with toolbridge(tmp_path, config, env=env, ready=lambda b: b["status"] == "ok") as (gateway, base):
        yield gateway, base


def lines_across_shutdown(gateway: subprocess.Popen[bytes], url: str, body: dict[str, Any]) -> list[str]:
    """The lines of a streamed answer whose tool call is under way when the gateway is sent SIGTERM (once the trace
    announces the call), to the stream's end; the gateway has exited."""
    seen: list[str] = []
    with httpx.stream("POST", url, json=body, timeout=EXIT_TIMEOUT) as response:
        lines = response.iter_lines()
        for line in lines:  # the trace announces the call as it starts
            seen.append(line)
            if "Calling sleep" in line:
                break
        gateway.send_signal(signal.SIGTERM)
        with contextlib.suppress(httpx.RemoteProtocolError):
            seen.extend(lines)
    assert gateway.wait(timeout=EXIT_TIMEOUT) == 0
    return seen


@pytest.mark.parametrize(("grace", "tool_seconds", "finishes"), [(30, 2, True), (0.5, 60, False)])
def test_streams_in_flight_get_the_grace_period_at_shutdown(
    tmp_path: Path, upstream: FakeUpstream, grace: float, tool_seconds: int, finishes: bool
) -> None:
    with serving(tmp_path, upstream, TOOLBRIDGE_SHUTDOWN_GRACE=str(grace)) as (gateway, base):
        children = psutil.Process(gateway.pid).children(recursive=True)
        upstream.script(Turn(calls=[Call("sleep", {"seconds": tool_seconds})]), Turn(content="slept well"))
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "sleep"}]}
        seen = lines_across_shutdown(gateway, f"{base}/v1/chat/completions", body)
        events = [line.removeprefix("data: ") for line in seen if line.startswith("data: ")]
        chunks = [json.loads(event) for event in events if event != "[DONE]"]
        content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
        if finishes:
            assert (content, events[-1]) == ("slept well", "[DONE]")
        else:  # cut off at the end of the grace: an error event and [DONE], never a made-up finish
            assert content == ""
            assert events[-1] == "[DONE]"
            assert chunks[-1]["error"]["code"] == "shutting_down"
            assert all(c["choices"][0]["finish_reason"] is None for c in chunks if c.get("choices"))
            log = (tmp_path / "gateway.log").read_text()
            assert log.count("answer_cut_at_shutdown") == 1
            assert "Traceback" not in log and "Exception in ASGI application" not in log
        _, alive = psutil.wait_procs(children, timeout=5)
        assert alive == []


def test_a_whole_answer_in_flight_is_finished_at_shutdown(tmp_path: Path, upstream: FakeUpstream) -> None:
    with serving(tmp_path, upstream, TOOLBRIDGE_SHUTDOWN_GRACE="30") as (gateway, base):
        upstream.script(Turn(calls=[Call("sleep", {"seconds": 2})]), Turn(content="slept well"))
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
        with ThreadPoolExecutor(1) as worker:
            reply = worker.submit(client.chat.completions.create, model="m",
                                  messages=[{"role": "user", "content": "sleep"}])
            deadline = time.monotonic() + EXIT_TIMEOUT
            while not upstream.chat_requests() and time.monotonic() < deadline:  # the tool is about to run
                time.sleep(0.02)
            gateway.send_signal(signal.SIGTERM)
            assert reply.result(timeout=EXIT_TIMEOUT).choices[0].message.content == "slept well"
        assert gateway.wait(timeout=EXIT_TIMEOUT) == 0


def test_serving_freezes_what_the_imports_made_and_collects_the_young_less_often() -> None:
    """The collector settings `toolbridge` serves with (throughput at c=16 and c=64 hangs on them; see
    bench/compare.py), checked in a process of their own: they are the whole process's."""
    code = ("import gc; from app import cli; before = gc.get_freeze_count(); cli._tune_garbage_collection(); "
            "print(before, gc.get_freeze_count() > before, gc.get_threshold()[0] == cli.GC_YOUNG_THRESHOLD)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["0", "True", "True"]


def logged_once(log: Path, word: str) -> str:
    """The gateway's log, once `word` is in it (bounded: the start-up lines follow the first look at once)."""
    deadline = time.monotonic() + EXIT_TIMEOUT
    while word not in (text := log.read_text()):
        assert time.monotonic() < deadline, f"{word} never logged:\n{text[-3000:]}"
        time.sleep(0.05)
    return text


def test_the_console_says_where_the_status_page_is_and_whether_the_model_server_answers(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    config = write_config(tmp_path, {"time": {"command": "mcp-server-time"}})  # it has no subscriptions/listen
    ready = lambda b: b["servers"]["time"]["state"] == "ready"  # noqa: E731
    down = f"http://127.0.0.1:{free_port()}/v1"
    (tmp_path / "down").mkdir()
    (tmp_path / "up").mkdir()
    with toolbridge(tmp_path / "down", config, env=clean_env() | {"TOOLBRIDGE_UPSTREAM_URL": down},
                    ready=ready) as (_gateway, base):
        text = logged_once(tmp_path / "down" / "gateway.log", "model_server_")
    assert f"status_page                    url={base}/" in text
    assert "model_server_not_answering     next_step=\"start LM Studio's local server" in text
    assert f"url={down}" in text
    # Nothing reads like an error when nothing is wrong yet: no warning, and the time server's missing
    # subscriptions ("Method not found") are for debugging.
    assert [line for line in text.splitlines() if "[warning" in line or "[error" in line] == []
    assert "mcp_listen_unavailable" not in text
    with toolbridge(tmp_path / "up", config, env=clean_env() | {"TOOLBRIDGE_UPSTREAM_URL": f"{upstream.url}/v1"},
                    ready=ready):
        text = logged_once(tmp_path / "up" / "gateway.log", "model_server_")
    assert "model_server_answers           models='qwen3-8b (8,192-token context); 1 more downloaded, not loaded'" \
        in text
