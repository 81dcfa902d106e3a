"""Slash commands in later turns, over real HTTP: the model sees the messages an earlier slash line's prompt
gave where the client keeps the line, and never the gateway's own answers (the `/prompts` list, a usage hint)
nor the lines they answered. Memory in SQLite and in Redis, across a restart, with the history sent back as
the openai SDK and Open WebUI send it (only the assistant's content), and scoped to the API key."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.chat.memory.test_memory import OWUI_TOOL, after_system, ask
from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.support.replica_services import RedisServer

ALICE, BOB = "sk-alice-0123456789", "sk-bob-9876543210"
SERVERS = {"library": stdio_entry("library.py")}
GREETING = {"role": "user", "content": "Write a plain greeting for Ada Lovelace."}  # /greet name="Ada Lovelace"


def settings(store: str, tmp: Path, request: pytest.FixtureRequest) -> dict[str, Any]:
    """A gateway with two API keys, showing images to the model, its memory in SQLite or Redis."""
    overrides: dict[str, Any] = {"api_keys": f"{ALICE},{BOB}", "vision": "on"}
    if store == "redis":
        redis_server: RedisServer = request.getfixturevalue("redis_server")
        overrides["state_url"] = redis_server.url
    else:
        overrides["state_url"] = f"sqlite:///{tmp / 'kept' / 'state.db'}"
    return overrides


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def store(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def library(store: str, upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory,
            request: pytest.FixtureRequest) -> Iterator[Gateway]:
    tmp = tmp_path_factory.mktemp(f"slash-{store}")
    with running_gateway(tmp, SERVERS, ready=("library",), key=ALICE, upstream_url=f"{upstream.url}/v1",
                         **settings(store, tmp, request)) as gateway:
        yield gateway


def open_webui(gateway: Gateway, chat: str, key: str = ALICE) -> openai.OpenAI:
    """As Open WebUI calls: its chat id in a header (ENABLE_FORWARD_USER_INFO_HEADERS), its own tools with every
    request, streamed; it keeps only the assistant's content."""
    return gateway.client(key, default_headers={"X-OpenWebUI-Chat-Id": chat})


def turn(client: openai.OpenAI, history: list[dict[str, Any]], text: str, **extra: Any) -> list[dict[str, Any]]:
    """Sends `text` after `history`, streamed with Open WebUI's tools; the history as the client keeps it."""
    messages = [*history, {"role": "user", "content": text}]
    return [*messages, {"role": "assistant", "content": ask(client, messages, stream=True, tools=[OWUI_TOOL],
                                                            **extra)}]


def seen(upstream: FakeUpstream) -> list[dict[str, Any]]:
    """What the model was sent in the last request's first round, after the gateway's system hint."""
    return after_system(upstream.chat_requests()[0]["messages"])


def test_the_next_turn_sees_the_prompt_where_the_slash_line_was(library: Gateway, upstream: FakeUpstream) -> None:
    client = open_webui(library, "chat-prompt")
    upstream.script(Turn(content="Hello, Ada Lovelace!"))
    history = turn(client, [], "/greet name=”Ada Lovelace”")  # the quotes Open WebUI's editor types
    upstream.script(Turn(content="Hi Ada!"))
    history = turn(client, history, "Shorter, please.")
    assert seen(upstream) == [GREETING, {"role": "assistant", "content": "Hello, Ada Lovelace!"},
                              {"role": "user", "content": "Shorter, please."}]

    # A later prompt's embedded resource too; its image is described, not kept.
    upstream.script(Turn(content="A pixel and two numbers."))
    history = turn(client, history, "/picture")
    upstream.script(Turn(content="Two."))
    turn(client, history, "How many shelves?")
    assert seen(upstream) == [
        GREETING, {"role": "assistant", "content": "Hello, Ada Lovelace!"},
        {"role": "user", "content": "Shorter, please."}, {"role": "assistant", "content": "Hi Ada!"},
        {"role": "user", "content": [
            {"type": "text", "text": "[an image shown with the prompt, not kept]"},
            {"type": "text", "text": 'Resource data://stats:\n{"notes": 3, "shelves": 2}'},
            {"type": "text", "text": "What does the picture show?"}]},
        {"role": "assistant", "content": "A pixel and two numbers."}, {"role": "user", "content": "How many shelves?"}]


def test_the_gateways_own_answers_and_their_lines_never_reach_the_model(
    library: Gateway, upstream: FakeUpstream
) -> None:
    client = open_webui(library, "chat-replies")
    upstream.script(Turn(content="Hello."))
    history = turn(client, [], "hi")
    upstream.script()  # the gateway answers these itself
    for typed in ("/prompts", "/greet", "/greet Ada", "/greet name=Ada Lovelace", "/gret"):
        history = turn(client, history, typed)
    assert upstream.chat_requests() == []
    assert "needs `name`" in history[-5]["content"]
    upstream.script(Turn(content="Hello, Ada Lovelace!"))
    history = turn(client, history, "/greet name=“Ada Lovelace”")
    assert seen(upstream) == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello."},
                              GREETING]
    upstream.script(Turn(content="You're welcome."))
    turn(client, history, "Thanks!")
    assert seen(upstream) == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello."},
                              GREETING, {"role": "assistant", "content": "Hello, Ada Lovelace!"},
                              {"role": "user", "content": "Thanks!"}]


def test_another_key_replaying_the_conversation_gets_nothing_of_it(library: Gateway, upstream: FakeUpstream) -> None:
    # Memory is the key's own: Bob's copy of Alice's history goes upstream as he sends it.
    upstream.script()
    history = turn(open_webui(library, "chat-shared"), [], "/prompts")
    upstream.script(Turn(content="Hello, Ada Lovelace!"))
    history = turn(open_webui(library, "chat-shared"), history, '/greet name="Ada Lovelace"')
    replay = [*history, {"role": "user", "content": "Again."}]
    upstream.script(Turn(content="Again: hello."))
    ask(open_webui(library, "chat-shared", BOB), replay, stream=True, tools=[OWUI_TOOL])
    assert seen(upstream) == replay


def test_a_prompt_that_calls_the_clients_tool_and_ours_keeps_its_messages(
    library: Gateway, upstream: FakeUpstream
) -> None:
    # The client comes back with its tool's result: the slash line is not the last message any more, and
    # still the model sees the prompt, both calls and both results.
    client = open_webui(library, "chat-mixed")
    upstream.script(Turn(calls=[Call("library__find_note", {"number": 1}), Call("get_current_timestamp", {})]))
    messages = [{"role": "user", "content": "/greet name='Ada Lovelace'"}]
    first = client.chat.completions.create(model="m", messages=messages, tools=[OWUI_TOOL])  # type: ignore[arg-type]
    assert first.choices[0].finish_reason == "tool_calls"
    [own] = first.choices[0].message.tool_calls or []
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": own.id, "content": "1763900000"}]
    upstream.script(Turn(content="Hello, Ada, at 1763900000."))
    client.chat.completions.create(model="m", messages=messages, tools=[OWUI_TOOL])  # type: ignore[arg-type]
    sent = seen(upstream)
    assert sent[0] == GREETING and [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
    assert [c["function"]["name"] for c in sent[1]["tool_calls"]] == ["library__find_note", "get_current_timestamp"]


@pytest.mark.parametrize("where", ["sqlite", "redis"])
def test_a_restart_keeps_what_the_slash_lines_were(
    where: str, upstream: FakeUpstream, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    overrides = settings(where, tmp_path, request)
    with running_gateway(tmp_path, SERVERS, ready=("library",), key=ALICE, upstream_url=f"{upstream.url}/v1",
                         **overrides) as before:
        upstream.script()
        history = turn(open_webui(before, "chat-restart"), [], "/prompts")
        upstream.script(Turn(content="Hello, Ada Lovelace!"))
        history = turn(open_webui(before, "chat-restart"), history, "/greet name=‘Ada Lovelace’")
    with running_gateway(tmp_path, SERVERS, ready=("library",), key=ALICE, upstream_url=f"{upstream.url}/v1",
                         **overrides) as after:
        upstream.script(Turn(content="Hi."))
        turn(open_webui(after, "chat-restart"), history, "Shorter, please.")
    assert seen(upstream) == [GREETING, {"role": "assistant", "content": "Hello, Ada Lovelace!"},
                              {"role": "user", "content": "Shorter, please."}]
