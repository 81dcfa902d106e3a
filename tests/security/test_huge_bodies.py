"""Audit 2026-11-27, S5: "200,000-message bodies still freeze the event loop on every door".

The attacker, with any key the gateway takes (or none), sends one conversation no model could hold: 200,000 short
messages, 8 MB, well under the 50 MB body limit. The gateway parsed, checked, translated and keyed it on the event
loop, so every other request, /health included, waited 7.8 to 10.8 s, on each of the four doors; a 50 MB body
would hold it six times as long.

Here the same bodies are sent by each door's official client, and refused with a 400 in the door's own shape that
says what is carried and the bound (app/api/chat_body.py), while /health goes on being answered; one more
message, content part or tool than a request carries is refused naming it. A body that is taken is read, and a
long history keyed and rewritten, off the event loop: a /health sent while that work is held is answered at once.
How long /health waits is measured by bench/hostile_doors.py, not here.
"""

import importlib
import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import anthropic
import httpx
import ollama
import openai
import orjson
import pytest

from app.api.chat_body import MAX_MESSAGES, MAX_PARTS, MAX_TOOLS, MAX_VALUES
from app.chat.memory import conversation as memory
from app.chat.memory.keys import ConversationKeys
from tests.conftest import Gateway, running_gateway
from tests.support.fake_upstream import FakeUpstream, Turn
from tests.support.servers import ServerThread

DOORS = ["chat", "responses", "messages", "ollama"]
IMAGE = "iVBORw0KGgo="  # the first bytes of a PNG, in base64
HOLD = 10.0  # how long held work waits for /health before going on: the test fails after it, never hangs


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, FakeUpstream]]:
    upstream = FakeUpstream(default=lambda body: Turn(content="fine"))
    with ServerThread(upstream.app) as model, running_gateway(
        tmp_path_factory.mktemp("huge"), upstream_url=f"{model.url}/v1",
    ) as gateway:
        yield gateway, upstream


def turns(count: int) -> list[dict[str, Any]]:
    """`count` distinct messages, the user's and the assistant's in turn, the user's first and last (count odd)."""
    return [{"role": ("user", "assistant")[n % 2], "content": f"m{n}"} for n in range(count)]


@dataclass(frozen=True)
class Refusal:
    status: int
    message: str
    code: str | None = None  # the OpenAI envelope's (Chat Completions, Responses); the other doors have none
    param: str | None = None


def ask(gateway: Gateway, door: str, messages: list[dict[str, Any]], *, plain: bool = False, **fields: Any) -> Any:
    """The door's official client asks the gateway; returns the answer or the client's error, as a Refusal.
    `plain`: the OpenAI SDK's own request without its typed method, whose check of every message took 25 s of
    200,000."""
    try:
        if door in ("chat", "responses") and plain:
            path, conversation = ("/responses", "input") if door == "responses" else ("/chat/completions", "messages")
            return gateway.client().post(path, body={"model": "m", conversation: messages, **fields}, cast_to=object)
        if door == "chat":
            return gateway.client().chat.completions.create(model="m", messages=messages, **fields)
        if door == "responses":
            return gateway.client().responses.create(model="m", input=messages, store=False, **fields)
        if door == "messages":
            client = anthropic.Anthropic(base_url=gateway.url, api_key="sk-client-secret", max_retries=0)
            return client.messages.create(model="m", max_tokens=10, messages=messages, **fields)
        return ollama.Client(host=gateway.url, timeout=120).chat(model="m", messages=messages, **fields)
    except openai.APIStatusError as exc:
        assert isinstance(exc.body, dict) and exc.body["type"] == "invalid_request_error", exc.body
        return Refusal(exc.status_code, exc.body["message"], exc.body["code"], exc.body["param"])
    except anthropic.APIStatusError as exc:
        assert isinstance(exc.body, dict) and exc.body["type"] == "error", exc.body
        assert exc.body["error"]["type"] == "invalid_request_error", exc.body
        return Refusal(exc.status_code, exc.body["error"]["message"])
    except ollama.ResponseError as exc:  # Ollama's {"error": "<message>"}
        return Refusal(exc.status_code, exc.error)


def probing_health(gateway: Gateway, work: Callable[[], Any]) -> tuple[Any, list[int]]:
    """What `work` returned, and the status of every /health asked one after another while it ran."""
    statuses: list[int] = []
    done = threading.Event()

    def probe() -> None:
        with httpx.Client(timeout=120) as client:
            while True:  # at least one, even when the work ends before the first probe is sent
                statuses.append(client.get(f"{gateway.url}/health").status_code)
                if done.is_set():
                    return

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        return work(), statuses
    finally:
        done.set()
        prober.join(timeout=130)


@pytest.mark.parametrize("door", DOORS)
def test_a_conversation_no_model_holds_is_refused_while_health_is_answered(
    served: tuple[Gateway, FakeUpstream], door: str
) -> None:
    gateway, upstream = served
    upstream.script()
    refusal, statuses = probing_health(gateway, lambda: ask(gateway, door, turns(200_001), plain=True))
    assert isinstance(refusal, Refusal) and refusal.status == 400, refusal
    assert f"more than {MAX_VALUES:,} JSON values" in refusal.message
    if door in ("chat", "responses"):  # the OpenAI envelope's; the other doors' errors carry no code
        assert refusal.code == "too_many_values"
    assert statuses and set(statuses) == {200}
    assert upstream.chat_requests() == []


def _parts(door: str, count: int) -> list[dict[str, Any]]:
    """A user message of `count` content parts, as the door spells them: text, or images where text is joined."""
    part = {
        "chat": {"type": "text", "text": "a"},
        "responses": {"type": "input_image", "image_url": f"data:image/png;base64,{IMAGE}"},
        "messages": {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": IMAGE}},
    }
    if door == "ollama":
        return [{"role": "user", "content": "", "images": [IMAGE] * count}]
    return [{"role": "user", "content": [part[door]] * count}]


def _tools(door: str, count: int) -> dict[str, Any]:
    schema = {"type": "object", "properties": {}}
    tool = {"responses": lambda n: {"type": "function", "name": f"f{n}", "parameters": schema},
            "messages": lambda n: {"name": f"f{n}", "input_schema": schema}}.get(
        door, lambda n: {"type": "function", "function": {"name": f"f{n}", "parameters": schema}})
    return {"tools": [tool(n) for n in range(count)]}


BOUNDS = [
    ("messages", MAX_MESSAGES, lambda door, count: (turns(count), {})),
    ("parts", MAX_PARTS, lambda door, count: (_parts(door, count), {})),
    ("tools", MAX_TOOLS, lambda door, count: ([{"role": "user", "content": "hi"}], _tools(door, count))),
]


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize(("what", "bound", "build"), BOUNDS, ids=[b[0] for b in BOUNDS])
def test_one_past_what_a_request_carries_is_refused_naming_it(
    served: tuple[Gateway, FakeUpstream], door: str, what: str, bound: int,
    build: Callable[[str, int], tuple[list[dict[str, Any]], dict[str, Any]]],
) -> None:
    gateway, upstream = served
    upstream.script()
    messages, fields = build(door, bound + 1)
    refusal = ask(gateway, door, messages, **fields)
    assert isinstance(refusal, Refusal) and refusal.status == 400, refusal
    assert f"at most {bound:,}" in refusal.message, refusal
    if door in ("chat", "responses"):
        conversation = "input" if door == "responses" else "messages"
        assert (refusal.code, refusal.param) == (f"too_many_{what}", "tools" if what == "tools" else conversation)
    assert upstream.chat_requests() == []


# Where each door reads its request, from its route: the body parsed, checked and translated.
# Where each door's body is read: the JSON (every door's, app/api/doors.py), and the door's translation of it.
READERS = {"chat": "app.api.doors.parse_json", "responses": "app.doors.responses.answer.read_request",
           "messages": "app.doors.messages.answer.chat_body", "ollama": "app.doors.ollama.answer.chat_body"}


def holding(original: Callable[..., Any], started: threading.Event, answered: threading.Event,
            seen: list[bool]) -> Callable[..., Any]:
    """`original`, made to wait (HOLD at most) for /health's answer before it does its work: where it runs on the
    event loop, /health cannot be answered meanwhile, and `seen` says so."""

    def held(*args: Any) -> Any:
        started.set()
        seen.append(answered.wait(HOLD))
        return original(*args)

    return held


def health_while_held(gateway: Gateway, started: threading.Event, answered: threading.Event,
                      work: Callable[[], Any]) -> Any:
    """`work` (a request) run while /health is asked once the held step has begun; returns what `work` returned."""
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(work)
        assert started.wait(120), "the request never reached the held step"
        assert httpx.get(f"{gateway.url}/health", timeout=120).status_code == 200
        answered.set()
        return running.result(timeout=120)


@pytest.mark.parametrize("door", DOORS)
def test_a_large_body_is_read_off_the_event_loop(
    served: tuple[Gateway, FakeUpstream], door: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """9,999 messages (400 KB): taken, and read in a worker thread; what the upstream gets is what was sent."""
    gateway, upstream = served
    upstream.script()
    started, answered, seen = threading.Event(), threading.Event(), []
    module, name = READERS[door].rsplit(".", 1)
    monkeypatch.setattr(READERS[door], holding(getattr(importlib.import_module(module), name), started, answered,
                                               seen))
    messages = turns(MAX_MESSAGES - 1)
    answer = health_while_held(gateway, started, answered, lambda: ask(gateway, door, messages))
    assert not isinstance(answer, Refusal), answer
    assert seen == [True], "/health waited for the body's reading: it ran on the event loop"
    [sent] = upstream.chat_requests()
    assert [(m["role"], m["content"]) for m in sent["messages"]] == [(m["role"], m["content"]) for m in messages]
    if door == "chat":
        assert sent["messages"] == messages


@pytest.mark.parametrize("step", ["keys", "rewrite"])
def test_a_long_history_is_keyed_and_rewritten_off_the_event_loop(
    served: tuple[Gateway, FakeUpstream], step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """601 messages in 25 KB: read on the loop (a small body), but memory's keys and rewrite go to a thread."""
    gateway, upstream = served
    upstream.script()
    started, answered, seen = threading.Event(), threading.Event(), []
    if step == "keys":
        monkeypatch.setattr(ConversationKeys, "lookups", holding(ConversationKeys.lookups, started, answered, seen))
    else:
        monkeypatch.setattr(memory, "rewrite_history", holding(memory.rewrite_history, started, answered, seen))
    messages = turns(601)
    answer = health_while_held(gateway, started, answered, lambda: ask(gateway, "chat", messages))
    assert not isinstance(answer, Refusal), answer
    assert seen[:1] == [True], f"/health waited for memory's {step}: it ran on the event loop"
    assert upstream.chat_requests()[-1]["messages"] == messages


def test_the_status_page_s_playground_takes_no_more_than_a_chat(served: tuple[Gateway, FakeUpstream]) -> None:
    """Its body was parsed by Python's JSON module on the event loop, values unbounded (a 50 MB list: seconds)."""
    gateway, _ = served
    arguments = ",".join(["0"] * MAX_VALUES)
    body = f'{{"tool": "basic__echo", "arguments": {{"text": [{arguments}]}}}}'.encode()
    answer, statuses = probing_health(gateway, lambda: httpx.post(
        f"{gateway.url}/ui/playground", content=body, timeout=120, headers={"Content-Type": "application/json"}))
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "too_many_values"
    assert set(statuses) == {200}


def test_a_long_previous_response_chain_is_read_off_the_event_loop(
    served: tuple[Gateway, FakeUpstream], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small request continuing a chain that holds up to the body limit: its stored turns were decoded on the
    event loop, 0.1 s for 50 MB. The earlier turn here holds 1 MB; its decoding is held."""
    gateway, upstream = served
    upstream.script()
    client = gateway.client()
    first = client.responses.create(model="m", input="x" * 1_000_000)
    second = client.responses.create(model="m", input="and?", previous_response_id=first.id)
    started, answered, seen = threading.Event(), threading.Event(), []
    loads = holding(orjson.loads, started, answered, seen)
    monkeypatch.setattr("app.doors.responses.store.orjson", SimpleNamespace(
        loads=lambda value: loads(value) if len(value) > 500_000 else orjson.loads(value), dumps=orjson.dumps))
    third = health_while_held(gateway, started, answered, lambda: client.responses.create(
        model="m", input="more?", previous_response_id=second.id))
    assert third.output_text == "fine"
    assert seen == [True], "/health waited for the chain's decoding: it ran on the event loop"
    assert [m["content"] for m in upstream.chat_requests()[-1]["messages"]] == [
        "x" * 1_000_000, "fine", "and?", "fine", "more?"]


@pytest.mark.parametrize("trap", ["lone surrogate", "70-bit seed"])
def test_a_large_body_orjson_cannot_write_is_not_written_again_on_the_event_loop(
    served: tuple[Gateway, FakeUpstream], trap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What orjson could not write went to the standard library's encoder whole, on the event loop: 0.1 to 0.2 s
    for 40 MB, to refuse a lone surrogate or to write a seed past 64 bits. Both are settled from what orjson said."""
    gateway, upstream = served
    upstream.script()
    written: list[object] = []
    monkeypatch.setattr("app.upstream.client.json", SimpleNamespace(
        dumps=lambda value, **options: written.append(value) or json.dumps(value, **options)))
    text = "lorem ipsum " * 300_000
    if trap == "lone surrogate":  # written by hand: the SDK cannot send one (httpx refuses to encode it)
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": text + "\ud800"}]}).encode()
        refused = httpx.post(f"{gateway.url}/v1/chat/completions", content=body, timeout=120,
                             headers={"Content-Type": "application/json"})
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_unicode", refused.text
    else:
        answer = ask(gateway, "chat", [{"role": "user", "content": text}], plain=True, seed=2**70)
        assert not isinstance(answer, Refusal), answer
        assert upstream.chat_requests()[-1]["seed"] == 2**70
    assert written == [], "the standard library wrote the body again"
