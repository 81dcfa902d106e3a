"""The reference servers from npm (server-everything, server-filesystem), as a user would configure them.

`npm ci --prefix tests/npm` installs them (the README's test command and CI do). Outside CI the tests
are skipped when they are not installed; in CI their absence is a failure.
"""

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.chat.memory.test_memory import ask as chat_turn
from tests.conftest import Gateway, running_gateway
from tests.conversion_checks import grammar_problems
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn, envelopes

BIN = Path(__file__).parent / "npm" / "node_modules" / ".bin"
EVERYTHING, FILESYSTEM = BIN / "mcp-server-everything", BIN / "mcp-server-filesystem"
INSTALLED = EVERYTHING.exists() and FILESYSTEM.exists()

if not INSTALLED and not os.environ.get("CI"):
    pytest.skip("reference servers not installed: run npm ci --prefix tests/npm", allow_module_level=True)


@pytest.fixture(scope="module")
def files_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert INSTALLED, "CI must install the reference servers: npm ci --prefix tests/npm"
    root = tmp_path_factory.mktemp("files")
    (root / "big.txt").write_text("".join(f"line {i}\n" for i in range(20_000)))
    (root / "small.txt").write_text("hello")
    return root


def reference_servers(root: Path) -> dict:
    return {"everything": {"command": str(EVERYTHING)}, "files": {"command": str(FILESYSTEM), "args": [str(root)]}}


def toolbridge_tools(config: Path, *flags: str) -> list[dict]:
    result = subprocess.run(
        [str(Path(sys.executable).parent / "toolbridge"), "tools", "--mcp-config", str(config), *flags],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_toolbridge_tools_shows_grammar_safe_reference_tools(files_root: Path, tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": reference_servers(files_root)}))
    raw = toolbridge_tools(config, "--schema-profile", "passthrough")
    safe = toolbridge_tools(config, "--schema-profile", "lmstudio")
    assert [t["function"]["name"] for t in safe] == [t["function"]["name"] for t in raw]
    assert len(safe) >= 20
    assert any(grammar_problems(t) for t in raw)  # the servers do send what grammars reject ($schema, defaults)
    assert {t["function"]["name"]: grammar_problems(t) for t in safe if grammar_problems(t)} == {}


@pytest.fixture(scope="module")
def reference_gateway(upstream: FakeUpstream, files_root: Path, tmp_path_factory: pytest.TempPathFactory
                      ) -> Iterator[Gateway]:
    with running_gateway(tmp_path_factory.mktemp("reference"), reference_servers(files_root),
                         ready=("everything", "files"), upstream_url=f"{upstream.url}/v1") as gateway:
        yield gateway


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_elicitation_tool_asks_in_the_chat_and_the_next_message_answers_it(
    reference_gateway: Gateway, upstream: FakeUpstream, stream: bool
) -> None:
    # server-everything offers its tool that asks only to a client that declared elicitation; its question comes
    # in the middle of the call (2025-era), which waits for the person's next message (app/mcp/held_calls.py).
    tools = httpx.get(f"{reference_gateway.url}/tools", timeout=30).json()["data"]
    names = {tool["function"]["name"] for tool in tools}
    assert {"everything__trigger-sampling-request", "everything__trigger-elicitation-request"} <= names
    client = reference_gateway.client()
    upstream.script(Turn(calls=[Call("everything__trigger-elicitation-request", {})]))
    history: list[dict[str, Any]] = [{"role": "user", "content": f"Fill in the form ({stream})."}]
    question = chat_turn(client, history, stream=stream)
    assert "Please provide inputs for the following fields:" in question
    assert "Your full, legal name" in question and "Superman" in question and "Guitar" in question
    history += [{"role": "assistant", "content": question},
                {"role": "user", "content": "name: Ada Lovelace\ninteger: 7\nTitled Single Select Enum: Wonder Woman"}]
    upstream.script(Turn(content="Thanks, Ada."))
    assert chat_turn(client, history, stream=stream) == "Thanks, Ada."
    [envelope] = envelopes(upstream.chat_requests()[-1])
    result = json.dumps(envelope, ensure_ascii=False)
    assert "User provided the requested information" in result and "Name: Ada Lovelace" in result
    assert "Favorite Integer: 7" in result and "hero-3" in result


def received(gateway: Gateway, upstream: FakeUpstream, call: Call) -> dict:
    upstream.script(Turn(calls=[call]), Turn(content="done"))
    gateway.client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "go"}])
    [envelope] = envelopes(upstream.chat_requests()[1])
    return envelope


def test_structured_content_reaches_the_model_as_data(reference_gateway: Gateway, upstream: FakeUpstream) -> None:
    envelope = received(reference_gateway, upstream, Call("everything__get-structured-content", {"location": "Oslo"}))
    assert envelope["status"] == "error"  # Oslo is not in the tool's enum: the gateway says so before calling
    assert envelope["data"]["fields"][0]["field"] == "location"
    chicago = Call("everything__get-structured-content", {"location": "Chicago"})
    envelope = received(reference_gateway, upstream, chicago)
    assert envelope["status"] == "success"
    assert set(envelope["data"]) == {"temperature", "conditions", "humidity"}


def test_an_image_is_described_to_the_model(reference_gateway: Gateway, upstream: FakeUpstream) -> None:
    envelope = received(reference_gateway, upstream, Call("everything__get-tiny-image", {}))
    images = [item for item in envelope["data"] if isinstance(item, dict) and item.get("type") == "image"]
    assert images and images[0]["mime_type"] == "image/png" and images[0]["size_bytes"] > 0


def test_a_failing_call_reaches_the_model_as_a_tool_error(reference_gateway: Gateway, upstream: FakeUpstream) -> None:
    envelope = received(reference_gateway, upstream, Call("files__read_text_file", {"path": "/etc/hostname"}))
    assert envelope["status"] == "error"
    assert envelope["data"]["error"] == "tool_error"
    assert "Access denied" in envelope["data"]["message"]


def test_a_large_file_is_cut_to_the_cap(
    reference_gateway: Gateway, upstream: FakeUpstream, files_root: Path
) -> None:
    read_big = Call("files__read_text_file", {"path": str(files_root / "big.txt")})
    envelope = received(reference_gateway, upstream, read_big)
    content = upstream.chat_requests()[1]["messages"][-1]["content"]
    assert len(content) <= 25_000
    assert envelope["meta"]["truncated"]["field"] == "content"
    assert envelope["data"]["content"].startswith("line 0\nline 1\n")
    assert envelope["meta"]["truncated"]["total_chars"] == (files_root / "big.txt").stat().st_size


def test_health_counts_the_tools_the_model_is_offered(reference_gateway: Gateway) -> None:
    # Every tool offered is counted, the one server-everything runs only as an MCP task (tasks.py) included.
    health = httpx.get(f"{reference_gateway.url}/health").json()
    offered = httpx.get(f"{reference_gateway.url}/tools").json()["data"]
    for server in ("everything", "files"):
        assert health["servers"][server]["tools"] == len([t for t in offered if t["server"] == server])
    assert health["tools"] == len(offered)


# -- resources and prompts (server-everything speaks the 2025 protocol: list changes come as notifications) --


def ask(gateway: Gateway, text: str, stream: bool = False) -> str:
    messages = [{"role": "user", "content": text}]
    if stream:
        chunks = gateway.client().chat.completions.create(model=MODEL, messages=messages, stream=True)  # type: ignore[arg-type]
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    completion = gateway.client().chat.completions.create(model=MODEL, messages=messages)  # type: ignore[arg-type]
    return completion.choices[0].message.content or ""


def test_everythings_resources_are_read_through_its_reader(reference_gateway: Gateway, upstream: FakeUpstream) -> None:
    reader = "everything__read_resource"
    document = received(reference_gateway, upstream,
                        Call(reader, {"uri": "demo://resource/static/document/architecture.md"}))
    assert document["data"].startswith("# Everything Server")
    templated = received(reference_gateway, upstream, Call(reader, {"uri": "demo://resource/dynamic/text/7"}))
    assert "Resource 7" in templated["data"]
    # The server's resources declared, the filesystem server's none: only one reader.
    names = {t["function"]["name"] for t in httpx.get(f"{reference_gateway.url}/tools", timeout=30).json()["data"]}
    assert reader in names and "files__read_resource" not in names


def test_everythings_resource_links_name_the_tool_that_reads_them(
    reference_gateway: Gateway, upstream: FakeUpstream
) -> None:
    envelope = received(reference_gateway, upstream, Call("everything__get-resource-links", {"count": 2}))
    links = [item for item in envelope["data"] if isinstance(item, dict) and item.get("type") == "resource_link"]
    assert len(links) == 2 and {link["read_with"] for link in links} == {"everything__read_resource"}
    read = received(reference_gateway, upstream, Call("everything__read_resource", {"uri": links[1]["uri"]}))
    assert read["status"] == "success" and "Resource 2" in json.dumps(read["data"])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_everythings_prompts_are_slash_commands(
    reference_gateway: Gateway, upstream: FakeUpstream, stream: bool
) -> None:
    upstream.script(Turn(content="sunny"))
    assert ask(reference_gateway, "/args-prompt city=Paris", stream) == "sunny"
    assert upstream.chat_requests()[0]["messages"][-1] == {"role": "user", "content": "What's weather in Paris?"}
    upstream.script(Turn(content="ok"))
    ask(reference_gateway, "/resource-prompt resourceType=Text resourceId=1", stream)
    expanded = upstream.chat_requests()[0]["messages"][-1]["content"]
    assert "demo://resource/dynamic/text/1" in expanded and "Resource 1" in expanded
    upstream.script(Turn(content="rainy"))
    assert ask(reference_gateway, "/args-prompt city=”New York” state=“NY”", stream) == "rainy"  # Open WebUI's quotes
    assert upstream.chat_requests()[0]["messages"][-1] == {"role": "user", "content": "What's weather in New York, NY?"}
    upstream.script()
    assert "needs `city`" in ask(reference_gateway, "/args-prompt", stream)
    assert "needs `city`. Give each argument as `name=value`" in ask(reference_gateway, "/args-prompt Paris", stream)
    assert "`/simple-prompt`: A prompt with no arguments" in ask(reference_gateway, "/prompts", stream)
    assert "- `Engineering`" in ask(reference_gateway, "/completable-prompt department=E?", stream)
    assert upstream.chat_requests() == []


def test_everythings_embedded_resource_prompt_is_what_the_next_turn_sees(
    reference_gateway: Gateway, upstream: FakeUpstream
) -> None:
    # Open WebUI: its editor's quotes, the gateway's list and hint before, only the assistant's content kept.
    client = reference_gateway.client(default_headers={"X-OpenWebUI-Chat-Id": "everything-resource"})
    history: list[dict[str, Any]] = []
    upstream.script(Turn(content="Resource 1 is plain text."))
    for typed in ("/prompts", "/args-prompt Paris", "/resource-prompt resourceType=”Text” resourceId=“1”"):
        history.append({"role": "user", "content": typed})
        chunks = client.chat.completions.create(model=MODEL, messages=history, stream=True)  # type: ignore[arg-type]
        history.append({"role": "assistant", "content": "".join(c.choices[0].delta.content or "" for c in chunks
                                                                if c.choices)})
    [expanded] = upstream.chat_requests()[0]["messages"][-1:]
    assert "demo://resource/dynamic/text/1" in expanded["content"]  # with the time the server made it at
    upstream.script(Turn(content="At the time it says."))
    history.append({"role": "user", "content": "When was it made?"})
    chunks = client.chat.completions.create(model=MODEL, messages=history, stream=True)  # type: ignore[arg-type]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "At the time it says."
    sent = [m for m in upstream.chat_requests()[0]["messages"] if m["role"] != "system"]
    assert sent == [expanded, history[-2], history[-1]]  # the same resource text, not the server's again
