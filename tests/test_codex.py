"""Issue 45: Codex CLI through the gateway, as a person runs it (`codex exec`, then `codex exec resume --last`), with
the config.toml of docs/doors.md, over real HTTP to a real gateway with real MCP servers over stdio; the model is
the scripted stand-in (bench/scripted_model.py), which calls the tool it is told to and answers from the result.

What the person reads: the MCP call's trace, which Codex prints by default only as a reasoning summary (C4); the
image a tool returned, in the final message that `codex exec` prints and `-o` writes (C10); an approval asked in
one turn and given in the next; and LM Studio down, the gateway's sentence. Opt-in: tests/support/codex.py.
"""

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bench.scripted_model import decide
from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.codex import Codex, skip_without_codex
from tests.support.fake_upstream import FakeUpstream
from tests.support.servers import ServerThread, free_port

skip_without_codex()

KEY = "sk-codex-key"
IMAGE = re.compile(r"!\[🖼 picture\]\((http://[^)\s]+/images/[\w-]+)\)")


@pytest.fixture(scope="module")
def model() -> Iterator[FakeUpstream]:
    stand_in = FakeUpstream(default=lambda body: decide(body, 8))
    with ServerThread(stand_in.app) as thread:
        stand_in.url = thread.url  # type: ignore[attr-defined]
        yield stand_in


@pytest.fixture(scope="module")
def gateway(model: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    servers = {"time": {"command": str(Path(sys.executable).parent / "mcp-server-time")},
               "pictures": stdio_entry("pictures.py"), "basic": {**stdio_entry("basic.py"), "confirm": ["add"]}}
    with running_gateway(tmp_path_factory.mktemp("codex-gateway"), servers, ready=tuple(servers), key=KEY,
                         api_keys=KEY, tool_prefix="on-conflict",
                         upstream_url=f"{model.url}/v1") as gateway:  # type: ignore[attr-defined]
        yield gateway


def test_the_tool_calls_trace_is_printed_by_default(gateway: Gateway, tmp_path: Path) -> None:
    printed = Codex(tmp_path, gateway.url, KEY).exec("What time is it in Tokyo?")
    assert printed.code == 0, printed.transcript
    assert 'Calling get_current_time({"timezone": "Asia/Tokyo"})' in printed.transcript
    assert re.search(r"get_current_time ok in \d+ ms: \{.*\"datetime\"", printed.transcript), printed.transcript
    assert re.fullmatch(r"It is 20\d\d-\S+\+09:00 in Asia/Tokyo\.\n", printed.answer), printed.answer


def test_the_image_a_tool_returned_is_in_the_final_message(gateway: Gateway, tmp_path: Path) -> None:
    printed = Codex(tmp_path, gateway.url, KEY).exec('call picture with {"kilobytes": 2}')
    assert printed.code == 0, printed.transcript
    [url] = IMAGE.findall(printed.answer)
    assert printed.answer.rstrip().endswith('"size_bytes":2122}]}')  # the model's words after it
    image = httpx.get(url, timeout=10)
    assert image.status_code == 200 and image.headers["content-type"] == "image/png"


def test_an_approval_is_asked_and_the_yes_on_the_next_turn_runs_the_call(
    gateway: Gateway, model: FakeUpstream, tmp_path: Path
) -> None:
    codex = Codex(tmp_path, gateway.url, KEY)
    asked = codex.exec('call add with {"a": 2, "b": 3}')
    assert asked.code == 0, asked.transcript
    assert 'Waiting for your approval: add({"a": 2, "b": 3})' in asked.transcript
    assert "- **add** on the server **basic**, with\n  - a: `2`\n  - b: `3`" in asked.answer
    assert "Reply **yes** to run it or **no** to refuse. Beyond this call: **yes for this chat**" in asked.answer
    assert not [m for m in model.chat_requests()[-1]["messages"] if m["role"] == "tool"]  # nothing ran yet
    ran = codex.resume("yes")
    assert ran.code == 0, ran.transcript
    assert 'Calling add({"a": 2, "b": 3})' in ran.transcript and 'add ok in' in ran.transcript
    assert ran.answer == 'The tool said: {"status":"success","data":{"result":"5"}}\n'


def test_lm_studio_down_prints_the_gateways_sentence(tmp_path: Path) -> None:
    with running_gateway(tmp_path, None, upstream_url=f"http://127.0.0.1:{free_port()}/v1", api_keys=KEY) as down:
        printed = Codex(tmp_path, down.url, KEY, retries=False).exec("hello")
    assert printed.code == 1 and printed.answer == ""
    assert re.search(r"ERROR: unexpected status 502 Bad Gateway: Cannot reach the upstream model server at "
                     r"http://127\.0\.0\.1:\d+/v1\. Start LM Studio's local server", printed.transcript), \
        printed.transcript
