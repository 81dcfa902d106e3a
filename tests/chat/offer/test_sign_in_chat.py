"""A chat while a mounted server waits for a person's sign-in, through a running gateway with the real OAuth pair
of tests/support/oauth_servers.py and a stdio server beside it, driven by the official openai SDK, whole and
streamed: the answer carries the sign-in link once per chat (not again while the history has it), the model is
told in one sentence that the server's tools are unavailable and is offered none of them; a key limited to other
servers, or a chat that switched the server off, hears of it neither; a key that may use the server but not give
its shared sign-in is told, once, that the operator gives it (no link); after the sign-in the next message has the
tools, and neither the note nor the link."""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.chat.answer.trace import strip_trace
from app.chat.offer.missing_servers import Waiting, model_note, servers_waiting, sign_in_lines
from app.chat.ports import LoopOptions, ToolSelection
from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn
from tests.support.oauth_servers import OAuthPair
from tests.test_sign_in import Person, wait_state

ALICE, BOB, CAROL, OPS = "sk-alice-3e8d21", "sk-bob-90c4aa", "sk-carol-7d21ef", "sk-ops-5b7f10"
NOTE = ("The tools of the MCP server 'protected' are unavailable until the user signs in (they have been given a "
        "sign-in link), so do not try to call them or make up their results.")


@contextmanager
def gateway_with_a_protected_server(tmp: Path, upstream: FakeUpstream) -> Iterator[Gateway]:
    """`protected` (OAuth, not signed in) and `basic` (stdio); Alice's key may use both and sign `protected` in,
    Carol's may use both, Bob's `basic` alone."""
    keys = tmp / "keys.json"
    keys.write_text(json.dumps({"keys": {
        ALICE: {"servers": ["protected", "basic"], "sign_in": ["protected"], "name": "alice"},
        BOB: {"servers": ["basic"], "name": "bob"}, CAROL: {"servers": ["protected", "basic"], "name": "carol"}}}))
    with OAuthPair.start() as pair:
        servers = {"protected": {"url": pair.mcp_server.mcp_url, "oauth": True}, "basic": stdio_entry("basic.py")}
        with running_gateway(tmp, servers, ready=("basic",), key=OPS, upstream_url=f"{upstream.url}/v1",
                             tool_trace="off", api_keys=OPS, keys_file=keys) as gateway:
            wait_state(gateway, "protected", "needs_sign_in", key=OPS)
            yield gateway


def ask(gateway: Gateway, key: str, messages: list[dict[str, Any]], stream: bool, **options: Any) -> str:
    """The answer's content as the client puts it together, whole or from the streamed deltas."""
    client = gateway.client(key)
    if not stream:
        completion = client.chat.completions.create(model=MODEL, messages=messages, **options)  # type: ignore[arg-type]
        return completion.choices[0].message.content or ""
    chunks = client.chat.completions.create(model=MODEL, messages=messages, stream=True, **options)  # type: ignore[arg-type]
    return "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)


def system_text(request: dict[str, Any]) -> str:
    return "\n".join(str(m["content"]) for m in request["messages"] if m["role"] == "system")


def tools_offered(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools") or []}


def link(gateway: Gateway) -> str:
    return f"{gateway.url}/ui/servers/protected/sign-in"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_link_once_the_note_for_the_model_and_the_tools_after_the_sign_in(
    tmp_path: Path, upstream: FakeUpstream, stream: bool
) -> None:
    with gateway_with_a_protected_server(tmp_path, upstream) as gateway:
        first = [{"role": "user", "content": "who am I?"}]
        upstream.script(Turn(content="I cannot tell yet."))
        answer = ask(gateway, ALICE, first, stream)
        assert answer == f"I cannot tell yet.\n\n> 🔑 To use protected's tools, sign in: {link(gateway)}"
        sent = upstream.chat_requests()[0]
        assert system_text(sent).count(NOTE) == 1
        assert tools_offered(sent) and not {name for name in tools_offered(sent) if name.startswith("protected__")}

        # The history has the link: not shown again; the model still hears of the server, and never of the link.
        second = [*first, {"role": "assistant", "content": answer}, {"role": "user", "content": "and now?"}]
        upstream.script(Turn(content="Still not."))
        assert ask(gateway, ALICE, second, stream) == "Still not."
        sent = upstream.chat_requests()[0]
        assert system_text(sent).count(NOTE) == 1
        assert "sign-in" not in json.dumps(sent["messages"]).replace(NOTE, "")
        assert sent["messages"][-2] == {"role": "assistant", "content": "I cannot tell yet."}

        # The link in the answer is the one that signs in (the status page's Basic credentials: Alice's key).
        assert httpx.get(link(gateway), auth=("", ALICE), timeout=30).status_code == 303
        assert Person(gateway, ALICE).sign_in("protected").status_code == 303
        wait_state(gateway, "protected", "ready", key=OPS)

        third = [*second, {"role": "assistant", "content": "Still not."}, {"role": "user", "content": "try again"}]
        upstream.script(Turn(calls=[Call("protected__whoami", {})]), Turn(content="You are alice."))
        assert ask(gateway, ALICE, third, stream) == "You are alice."
        sent, after = upstream.chat_requests()
        assert {"protected__whoami", "protected__echo"} <= tools_offered(sent)
        assert NOTE not in system_text(sent) and "unavailable" not in system_text(sent)
        assert json.loads(after["messages"][-1]["content"])["status"] == "success"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_neither_a_key_limited_to_other_servers_nor_a_chat_without_the_server_hears_of_it(
    tmp_path: Path, upstream: FakeUpstream, stream: bool
) -> None:
    with gateway_with_a_protected_server(tmp_path, upstream) as gateway:
        messages = [{"role": "user", "content": "hello"}]
        for key, options in ((BOB, {}), (ALICE, {"extra_headers": {"X-Toolbridge-Tools": "basic"}}),
                             (ALICE, {"extra_headers": {"X-Toolbridge-Tools": "-protected"}})):
            upstream.script(Turn(content="Hi."))
            assert ask(gateway, key, messages, stream, **options) == "Hi."
            sent = upstream.chat_requests()[0]
            assert "protected" not in json.dumps(sent), (key, options)
            assert {name.partition("__")[0] for name in tools_offered(sent)} == {"basic"}
        upstream.script(Turn(content="Hi."))  # the operator's key uses every server: it is told
        assert ask(gateway, OPS, messages, stream).endswith(link(gateway))
        assert NOTE in system_text(upstream.chat_requests()[0])


def test_a_key_that_may_not_give_the_shared_sign_in_is_told_the_operator_gives_it_once(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    with gateway_with_a_protected_server(tmp_path, upstream) as gateway:
        first = [{"role": "user", "content": "who am I?"}]
        upstream.script(Turn(content="I cannot tell yet."))
        answer = ask(gateway, CAROL, first, stream=False)
        assert answer == ("I cannot tell yet.\n\n> 🔑 protected's tools wait for a sign-in that only the gateway's "
                          "operator can give.")
        assert "/sign-in" not in answer  # no link that would answer 403
        note = system_text(upstream.chat_requests()[0])
        assert "until the gateway's operator signs in to it" in note and "sign-in link" not in note
        second = [*first, {"role": "assistant", "content": answer}, {"role": "user", "content": "and now?"}]
        upstream.script(Turn(content="Still not."))
        assert ask(gateway, CAROL, second, stream=False) == "Still not."


class SignIns:
    def __init__(self, *names: str, operators: tuple[str, ...] = ()) -> None:
        self.names, self.operators = [*names, *operators], operators

    def servers_needing_sign_in(self) -> list[str]:
        return self.names

    def may_sign_in(self, name: str) -> bool:
        return name not in self.operators


def test_the_servers_a_request_mounts_and_the_one_sentence_the_model_is_told() -> None:
    options = LoopOptions(max_tool_rounds=3)
    assert servers_waiting(SignIns("a", "b"), options) == Waiting(["a", "b"])
    assert servers_waiting(None, options) == Waiting()
    assert servers_waiting(SignIns("a", "b"), LoopOptions(max_tool_rounds=3, offer_tools=False)) == Waiting()
    chosen = LoopOptions(max_tool_rounds=3, tool_selection=ToolSelection((frozenset({"b", "c"}),)))
    assert servers_waiting(SignIns("a", "b"), chosen) == Waiting(["b"])
    left_out = LoopOptions(max_tool_rounds=3, tool_selection=ToolSelection(exclude=frozenset({"a"})))
    assert servers_waiting(SignIns("a", "b"), left_out) == Waiting(["b"])
    assert servers_waiting(SignIns("a", operators=("b",)), options) == Waiting(["a"], ["b"])
    assert model_note(Waiting()) is None
    assert model_note(Waiting(["protected"])) == NOTE
    assert model_note(Waiting(["a", "b"])) == (
        "The tools of the MCP servers 'a' and 'b' are unavailable until the user signs in (they have been given a "
        "sign-in link), so do not try to call them or make up their results.")
    assert model_note(Waiting(["a"], ["b", "c"])) == (
        "The tools of the MCP server 'a' are unavailable until the user signs in (they have been given a sign-in "
        "link), and the tools of the MCP servers 'b' and 'c' are unavailable until the gateway's operator signs in "
        "to them (the user has been told), so do not try to call them or make up their results.")


def test_a_line_a_server_not_linked_before_and_the_lines_leave_the_history_again() -> None:
    def base() -> str:
        return "https://gw.example/"

    history = [{"role": "user", "content": "see https://gw.example/ui/servers/a/sign-in"},
               {"role": "assistant", "content": [{"type": "text", "text": "x /ui/servers/b/sign-in"}]}]
    lines = sign_in_lines(Waiting(["a", "b", "my drive"], ["shared"]), history, base)
    assert lines == "> 🔑 To use a's tools, sign in: https://gw.example/ui/servers/a/sign-in\n\n" \
                    "> 🔑 To use my drive's tools, sign in: https://gw.example/ui/servers/my%20drive/sign-in\n\n" \
                    "> 🔑 shared's tools wait for a sign-in that only the gateway's operator can give."

    def never() -> str:
        raise AssertionError("no link to write: the base URL is not asked for")

    assert sign_in_lines(Waiting(["b"]), history, never) == ""
    told = [{"role": "assistant", "content": lines}]
    assert sign_in_lines(Waiting([], ["shared"]), told, never) == ""  # once per chat, as a link is
    assert strip_trace(f"It is sunny.\n\n{lines}") == "It is sunny."
    assert strip_trace(f"{lines}\n\nAfter.") == "After."
