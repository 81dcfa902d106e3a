"""S9 of the 2026-11-27 audit: a key taken out of the keys file kept running tools in its requests in flight. The
scope was read once, at admission: with the key removed 4 s into a 4-round stream, a new request got a 401 but the
running stream made 3 more tool calls and ended normally (the bound: TOOLBRIDGE_MAX_TOOL_ROUNDS times the tool
timeout, or 10 minutes for a held call).

The attacker holds a key that is about to be taken out (or narrowed) and keeps a long tool loop running. Now every
call asks the keys file again before it runs (app/mcp/key_view.py): a key taken out stops its request before its
next call, with a 401 error event, and a call outside a narrowed set is a call of an unknown tool. Real HTTP with
the openai SDK, a real stdio server (basic.py), the real keys file rewritten while the stream waits on its first
call, which is let go only once the gateway has read the new file."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn, readable
from tests.test_key_sets import until

ALICE, OPS = "sk-alice-withdrawn-1", "sk-ops-withdrawn-0"
SERVERS = {"basic": stdio_entry("basic.py"), "files": stdio_entry("files.py")}
Chunks = Iterator[openai.types.chat.ChatCompletionChunk]


def write_keys(path: Path, alice: list[str] | str | None) -> None:
    """The keys file with Alice's servers, or without Alice (None)."""
    path.write_text(json.dumps({"keys": {} if alice is None else {ALICE: {"servers": alice, "name": "alice"}}}))


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    return tmp_path / "keys.json"


@pytest.fixture
def gateway(upstream: FakeUpstream, tmp_path: Path, keys: Path) -> Iterator[Gateway]:
    write_keys(keys, ["basic", "files"])
    with running_gateway(tmp_path, SERVERS, ready=tuple(SERVERS), key=OPS, upstream_url=f"{upstream.url}/v1",
                         tool_trace="reasoning", api_keys=OPS, keys_file=keys) as gateway:
        yield gateway


def reasoning(chunk: Any) -> str:
    return "".join((choice.delta.model_extra or {}).get("reasoning_content") or "" for choice in chunk.choices)


def first_call_running(gateway: Gateway, upstream: FakeUpstream, marker: Path) -> Chunks:
    """Alice's stream, read until its first call (a rendezvous nobody else has joined yet) has started. The model
    then calls `sleep`, whose start leaves `<marker>.started`, and answers."""
    rendezvous = {"key": marker.name, "parties": 2, "wait_seconds": 20}
    upstream.script(Turn(calls=[Call("basic__rendezvous", rendezvous)]),
                    Turn(calls=[Call("basic__sleep", {"seconds": 0, "marker": str(marker)})]),
                    Turn(content="Both ran."))
    chunks = iter(gateway.client(ALICE).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Meet, then sleep."}], stream=True))
    for chunk in chunks:
        if "Calling basic__rendezvous" in reasoning(chunk):
            return chunks
    raise AssertionError("the stream ended before its first call")


def alices_tools(gateway: Gateway) -> int | set[str]:
    """What /tools says to Alice's key now: her servers, or the status of its refusal."""
    answer = httpx.get(f"{gateway.url}/tools", headers={"Authorization": f"Bearer {ALICE}"}, timeout=30)
    return {tool["server"] for tool in answer.json()["data"]} if answer.status_code == 200 else answer.status_code


def let_the_first_call_go(gateway: Gateway, marker: Path) -> None:
    """The operator joins the rendezvous: Alice's first call, already running, ends well."""
    joined = httpx.post(f"{gateway.url}/ui/playground", auth=("", OPS), timeout=30, json={
        "tool": "basic__rendezvous", "arguments": {"key": marker.name, "parties": 2, "wait_seconds": 20}})
    assert f"met 2 at {marker.name}" in joined.json()["content"]


@pytest.mark.parametrize("servers", [["basic", "files"], "*"], ids=["limited", "every-server"])
def test_a_key_taken_out_stops_its_stream_before_the_next_call(
    gateway: Gateway, upstream: FakeUpstream, keys: Path, tmp_path: Path, servers: list[str] | str
) -> None:
    write_keys(keys, servers)
    until(lambda: alices_tools(gateway) == {"basic", "files"}, "the keys file was not read")
    marker = tmp_path / f"second-{servers == '*'}"
    chunks = first_call_running(gateway, upstream, marker)
    write_keys(keys, None)
    until(lambda: alices_tools(gateway) == 401, "a key taken out still works")
    let_the_first_call_go(gateway, marker)
    with pytest.raises(openai.APIError) as stopped:
        for _ in chunks:
            pass
    assert stopped.value.body == {"message": "The API key of this request was taken out of the gateway's keys file "
                                  "while it ran; it stopped before its next tool call.",
                                  "type": "authentication_error", "param": None, "code": "key_withdrawn"}
    assert not Path(f"{marker}.started").exists()  # the next call never reached the server
    assert len(upstream.chat_requests()) == 2  # nor was the model asked again


def test_a_narrowed_key_is_refused_the_calls_outside_its_servers_mid_stream(
    gateway: Gateway, upstream: FakeUpstream, keys: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "narrowed"
    chunks = first_call_running(gateway, upstream, marker)
    write_keys(keys, ["files"])
    until(lambda: alices_tools(gateway) == {"files"}, "the narrowed file was not read")
    let_the_first_call_go(gateway, marker)
    assert "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices) == "Both ran."
    assert not Path(f"{marker}.started").exists()
    told = readable(upstream.chat_requests()[-1]["messages"][-1]["content"])
    assert told.startswith("Error[unknown_tool]: There is no tool named 'basic__sleep'"), told
