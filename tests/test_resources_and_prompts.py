"""MCP resources and prompts through the gateway, as a chat client and its model meet them.

Resources: each server with resources gets `{server}__read_resource`, which reads by URI (also the links
in other tools' results) or lists. Prompts: a user message `/name arg=value` is expanded into the prompt's
messages before the upstream sees it; what needs no model the gateway answers itself.
The server is `tests/support/mcp_servers/library.py` over stdio (2026 protocol); server-everything (2025)
is in test_reference_servers.py.
"""

import base64
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from structlog.contextvars import merge_contextvars
from structlog.testing import capture_logs

from app.chat.answer.trace import strip_shown
from tests.conftest import Gateway, running_gateway, stdio_entry, wait_for_health
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn, envelopes
from tests.support.mcp_servers.library import PIXEL

READER = "library__read_resource"


@pytest.fixture(scope="module")
def library(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with running_gateway(tmp_path_factory.mktemp("library"), {"library": stdio_entry("library.py")},
                         ready=("library",), upstream_url=f"{upstream.url}/v1", vision="on") as gateway:
        yield gateway


def offered(gateway: Gateway) -> dict[str, dict[str, Any]]:
    return {tool["function"]["name"]: tool for tool in httpx.get(f"{gateway.url}/tools", timeout=30).json()["data"]}


def chat(gateway: Gateway, text: str, *, stream: bool, history: list[dict[str, Any]] | None = None) -> str:
    messages = [*(history or []), {"role": "user", "content": text}]
    client = gateway.client()
    if stream:
        chunks = client.chat.completions.create(model=MODEL, messages=messages, stream=True)  # type: ignore[arg-type]
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    completion = client.chat.completions.create(model=MODEL, messages=messages)  # type: ignore[arg-type]
    assert completion.choices[0].finish_reason == "stop"
    return completion.choices[0].message.content or ""


def read(gateway: Gateway, upstream: FakeUpstream, arguments: dict[str, Any]) -> dict[str, Any]:
    upstream.script(Turn(calls=[Call(READER, arguments)]), Turn(content="done"))
    assert strip_shown(chat(gateway, "read it", stream=False)) == "done"  # an image read is shown to the person too
    [envelope] = envelopes(upstream.chat_requests()[1])
    return envelope


# -- resources ------------------------------------------------------------------------------------------


def test_the_reader_tool_lists_the_resources_and_templates(library: Gateway) -> None:
    function = offered(library)[READER]["function"]
    assert "note://2 (note-2): Note number 2" in function["description"]
    assert "book://{title}" in function["description"]
    assert set(function["parameters"]["properties"]) == {"uri", "list", "cursor"}


def test_a_text_resource_is_read_through_the_tool(library: Gateway, upstream: FakeUpstream) -> None:
    assert read(library, upstream, {"uri": "note://2"}) == {"status": "success", "data": "The text of note 2."}


def test_json_is_parsed_a_template_is_filled_and_binary_is_described(
    library: Gateway, upstream: FakeUpstream
) -> None:
    assert read(library, upstream, {"uri": "data://stats"})["data"] == {"notes": 3, "shelves": 2}
    assert read(library, upstream, {"uri": "book://Dune"})["data"] == "The first line of Dune."
    logo = read(library, upstream, {"uri": "pixel://logo"})["data"]
    assert logo["type"] == "resource" and logo["mime_type"] == "image/png" and logo["size_bytes"] > 0
    # A vision model (vision=on here) is shown the picture too, after the tool result.
    after = upstream.chat_requests()[1]["messages"][-1]
    assert after["role"] == "user" and after["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")


def test_an_image_the_model_reads_is_shown_to_the_person(library: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(calls=[Call(READER, {"uri": "pixel://logo"})]), Turn(content="done"))
    answer = chat(library, "read it", stream=True)
    [url] = re.findall(r"^!\[🖼 [^\]]*\]\((http://[^)]+/images/[\w-]+)\)$", answer, re.MULTILINE)
    assert httpx.get(url).content == base64.b64decode(PIXEL) and answer.endswith("\n\ndone")


def test_a_missing_resource_and_empty_arguments_are_errors_the_model_can_act_on(
    library: Gateway, upstream: FakeUpstream
) -> None:
    missing = read(library, upstream, {"uri": "note://404"})
    assert missing["status"] == "error" and "note://404" in missing["data"]["message"]
    empty = read(library, upstream, {})
    assert empty["status"] == "error" and empty["data"]["error"] == "invalid_arguments"
    assert "uri" in empty["data"]["message"]


def test_list_gives_a_page_of_resources(library: Gateway, upstream: FakeUpstream) -> None:
    listed = read(library, upstream, {"list": True})["data"]["resources"]
    assert {"uri": "note://1", "name": "note-1", "description": "Note number 1", "mime_type": "text/plain"} in listed


def test_a_link_in_a_tool_result_is_read_in_the_next_round(library: Gateway, upstream: FakeUpstream) -> None:
    def read_the_link(request: dict[str, Any]) -> Turn:
        [envelope] = envelopes(request)
        link = envelope["data"][1]
        assert link["type"] == "resource_link" and link["read_with"] == READER
        return Turn(calls=[Call(link["read_with"], {"uri": link["uri"]})])

    upstream.script(Turn(calls=[Call("library__find_note", {"number": 3})]), read_the_link, Turn(content="done"))
    assert chat(library, "what does note 3 say?", stream=True) == "done"
    assert envelopes(upstream.chat_requests()[2]) == [{"status": "success", "data": "The text of note 3."}]


def test_the_description_stays_bounded_with_a_thousand_resources(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    server = {**stdio_entry("library.py"), "env": {"LIBRARY_NOTES": "1000"}}
    with running_gateway(tmp_path, {"library": server}, ready=("library",),
                         upstream_url=f"{upstream.url}/v1") as gateway:
        description = offered(gateway)[READER]["function"]["description"]
        assert len(description) <= 1000
        assert "note://1 (note-1)" in description
        shown = description.count("\n- note://")
        # 1,002 resources (notes, stats, logo), of which the first 1,000 were listed: "and N+ more".
        assert f"...and {1000 - shown}+ more: call with list: true" in description
        listing = httpx.get(f"{gateway.url}/resources", timeout=30).json()["data"]
        assert len(listing[0]["resources"]) == 1000 and listing[0]["more"] is True  # a bounded listing
        envelope = read(gateway, upstream, {"list": True})
        assert envelope["meta"]["truncated"]["total_items"] == 1002  # notes, stats, logo: cut to the result cap
        assert len(upstream.chat_requests()[1]["messages"][-1]["content"]) <= 25_000


def test_resource_changes_reach_the_description(library: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(calls=[Call("library__shelve", {"number": 77, "text": "shelved late"})]), Turn(content="ok"))
    chat(library, "shelve a note", stream=False)
    wait_for_health(library.url, lambda _: "note://77" in offered(library)[READER]["function"]["description"])
    assert read(library, upstream, {"uri": "note://77"})["data"] == "shelved late"


def test_resources_are_listed_over_http(library: Gateway) -> None:
    [entry] = httpx.get(f"{library.url}/resources", timeout=30).json()["data"]
    assert entry["server"] == "library" and entry["read_with"] == READER
    assert {"uri": "note://1", "name": "note-1", "description": "Note number 1", "mimeType": "text/plain"} in (
        entry["resources"])
    assert entry["templates"][0]["uriTemplate"] == "book://{title}"


def test_the_setting_turns_the_reader_off(upstream: FakeUpstream, tmp_path: Path) -> None:
    with running_gateway(tmp_path, {"library": stdio_entry("library.py")}, ready=("library",),
                         upstream_url=f"{upstream.url}/v1", resource_tools=False) as gateway:
        assert READER not in offered(gateway) and "library__find_note" in offered(gateway)
        upstream.script(Turn(calls=[Call("library__find_note", {"number": 1})]), Turn(content="done"))
        chat(gateway, "find note 1", stream=False)
        [envelope] = envelopes(upstream.chat_requests()[1])
        assert "read_with" not in envelope["data"][1]


# -- prompts ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_prompt_is_expanded_before_the_upstream_sees_it(
    library: Gateway, upstream: FakeUpstream, stream: bool
) -> None:
    upstream.script(Turn(content="Hello, Ada!"))
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello."}]
    assert chat(library, '/greet name=Ada style="very warm"', stream=stream, history=history) == "Hello, Ada!"
    [request] = upstream.chat_requests()
    assert request["messages"][-3:] == [*history, {"role": "user", "content": "Write a very warm greeting for Ada."}]


@pytest.mark.parametrize("typed", ["/greet name=”Ada Lovelace” style=”very warm”",
                                   "/greet name=“Ada Lovelace” style=‘very warm’",
                                   "/greet name=\"Ada Lovelace” style='very warm’"],
                         ids=["closing-quotes", "opening-and-closing", "mixed"])
def test_typographic_quotes_as_open_webuis_editor_types_them_are_quotes(
    library: Gateway, upstream: FakeUpstream, typed: str
) -> None:
    upstream.script(Turn(content="Hello, Ada!"))
    assert chat(library, typed, stream=True) == "Hello, Ada!"
    assert upstream.chat_requests()[0]["messages"][-1] == {
        "role": "user", "content": "Write a very warm greeting for Ada Lovelace."}


def test_a_prompt_of_one_argument_takes_its_value_bare_and_roles_are_kept(
    library: Gateway, upstream: FakeUpstream
) -> None:
    upstream.script(Turn(content="The worst bug is..."))
    chat(library, "/review print(1/0)", stream=False)
    messages = upstream.chat_requests()[0]["messages"]
    assert messages[-3:] == [
        {"role": "user", "content": "Review this code:\nprint(1/0)"},
        {"role": "assistant", "content": "I will look for bugs first."},
        {"role": "user", "content": "Start with the worst one."},
    ]


def test_images_and_embedded_resources_of_a_prompt_reach_a_vision_model(
    library: Gateway, upstream: FakeUpstream
) -> None:
    upstream.script(Turn(content="A pixel."))
    chat(library, "/picture", stream=True)
    [message] = upstream.chat_requests()[0]["messages"][-1:]
    parts = message["content"]  # three user messages in a row, joined: chat templates want roles to alternate
    assert message["role"] == "user" and [p["type"] for p in parts] == ["image_url", "text", "text"]
    assert parts[0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert parts[1]["text"].startswith("Resource data://stats:\n") and "shelves" in parts[1]["text"]
    assert parts[2]["text"] == "What does the picture show?"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize(("typed", "expected"), [
    ("/greet", ["needs `name`", "`/greet name=… [style=…]`", "`name` (required)"]),
    ("/greet name=Ada mood=sad", ["has no argument `mood`"]),
    ("/gret name=Ada", ["There is no prompt `/gret`", "Did you mean `/greet`"]),
    ("/prompts", ["`/greet name=… [style=…]`: Greets someone.", "`/review code=…`", "`/picture`"]),
    ("/help", ["`/review code=…`: Reviews a piece of code"]),
    ('/greet name="Ada', ["a quote is not closed"]),
    ("/broken", ["The prompt `/broken` failed: MCP server 'library' refused the prompt"]),
    ("/greet name=A?", ["Values for `name`", "- `Ada`\n- `Alan`"]),
    ("/greet Ada", ["needs `name`", "as `name=value`", "`/greet name=… [style=…]`", "`name` (required)"]),
    ("/greet is what command?", ["needs `name`", "as `name=value`"]),
    ("/greet name=Ada Lovelace", ["needs `name`", 'with quotes around a value that has spaces (`name="two words"`)']),
    ("/picture please", ["`/picture` takes no arguments"]),
], ids=["missing", "unknown-argument", "unknown-prompt", "list", "help", "unclosed-quote", "failing", "completion",
        "bare-value-of-two", "a-sentence", "unquoted-spaces", "words-for-none"])
def test_the_gateway_answers_without_calling_the_model(
    library: Gateway, upstream: FakeUpstream, typed: str, expected: list[str], stream: bool
) -> None:
    upstream.script()
    answer = chat(library, typed, stream=stream)
    for part in expected:
        assert part in answer
    assert upstream.chat_requests() == []


def test_a_line_that_only_starts_with_a_slash_goes_to_the_model_as_typed(
    library: Gateway, upstream: FakeUpstream
) -> None:
    for text in ("/usr/bin/env: what is it?", "/nope and some words", "/shrug it's fine"):
        upstream.script(Turn(content="answered"))
        assert chat(library, text, stream=False) == "answered"
        assert upstream.chat_requests()[0]["messages"][-1] == {"role": "user", "content": text}


def test_prompt_changes_are_followed(library: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(calls=[Call("library__teach", {})]), Turn(content="ok"))
    chat(library, "learn a prompt", stream=False)
    wait_for_health(library.url, lambda _: any(p["name"] == "farewell" for p in prompts(library)))
    upstream.script(Turn(content="Goodbye!"))
    assert chat(library, "/farewell", stream=False) == "Goodbye!"
    assert upstream.chat_requests()[0]["messages"][-1] == {"role": "user", "content": "Say goodbye nicely."}


def prompts(gateway: Gateway) -> list[dict[str, Any]]:
    return httpx.get(f"{gateway.url}/prompts", timeout=30).json()["data"]


def test_prompts_are_listed_over_http(library: Gateway) -> None:
    greet = next(p for p in prompts(library) if p["name"] == "greet")
    assert greet["command"] == "/greet" and greet["server"] == "library"
    assert [a["name"] for a in greet["arguments"]] == ["name", "style"]


def test_a_prompt_name_two_servers_share_needs_the_server(upstream: FakeUpstream, tmp_path: Path) -> None:
    servers = {"one": stdio_entry("library.py"), "two": stdio_entry("library.py")}
    with running_gateway(tmp_path, servers, ready=("one", "two"), upstream_url=f"{upstream.url}/v1") as gateway:
        upstream.script()
        answer = chat(gateway, "/greet name=Ada", stream=False)
        assert "`/one.greet`, `/two.greet`" in answer and upstream.chat_requests() == []
        assert "`/one.greet name=… [style=…]`" in chat(gateway, "/prompts", stream=False)
        upstream.script(Turn(content="Hi Ada"))
        assert chat(gateway, "/two.greet name=Ada", stream=True) == "Hi Ada"
        assert upstream.chat_requests()[0]["messages"][-1]["content"] == "Write a plain greeting for Ada."


def test_commands_can_be_turned_off(upstream: FakeUpstream, tmp_path: Path) -> None:
    with running_gateway(tmp_path, {"library": stdio_entry("library.py")}, ready=("library",),
                         upstream_url=f"{upstream.url}/v1", prompt_commands=False) as gateway:
        upstream.script(Turn(content="as typed"))
        assert chat(gateway, "/greet name=Ada", stream=False) == "as typed"
        assert upstream.chat_requests()[0]["messages"][-1]["content"] == "/greet name=Ada"


def test_without_prompts_a_slash_line_goes_to_the_model(gateway: Gateway, upstream: FakeUpstream) -> None:
    # The session's gateway has servers without prompts: only /prompts is the gateway's own.
    upstream.script(Turn(content="as typed"))
    assert chat(gateway, "/greet name=Ada", stream=False) == "as typed"
    upstream.script()
    assert chat(gateway, "/prompts", stream=True) == "No MCP server offers prompts."
    assert upstream.chat_requests() == []


def test_expanded_prompts_keep_the_tool_loop(library: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(calls=[Call(READER, {"uri": "note://1"})]), Turn(content="It says: note 1."))
    assert chat(library, "/review code=x", stream=True) == "It says: note 1."
    first, second = upstream.chat_requests()
    assert first["messages"][-1]["content"] == "Start with the worst one."
    assert json.loads(second["messages"][-1]["content"])["data"] == "The text of note 1."


def test_the_log_line_names_the_prompt_and_never_what_was_typed(library: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="Hi"))
    sent: list[str] = []  # this test's request ids: another test's streamed line may still be on its way
    with capture_logs(processors=[merge_contextvars]) as logs:  # the request id is bound to the context
        for text, stream in (("/greet name=Secret-Name-7", False), ("/greet", True)):
            response = httpx.post(f"{library.url}/v1/chat/completions", timeout=30, json={
                "model": MODEL, "stream": stream, "messages": [{"role": "user", "content": text}]})
            assert response.status_code == 200
            sent.append(response.headers["x-request-id"])
            upstream.script()

        def lines() -> list[dict[str, Any]]:
            return [e for e in logs if e["event"] == "request" and e.get("request_id") in sent]

        deadline = time.monotonic() + 10  # the line is written once the last byte is sent, as the client reads it
        while len(lines()) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    logged = [(line.get("prompt"), line.get("answered_by_gateway")) for line in lines()]
    assert logged == [("greet", None), (None, True)]
    assert "Secret-Name-7" not in repr(logs)


def test_memory_gives_back_an_expanded_turns_prompt_and_tool_results(library: Gateway, upstream: FakeUpstream) -> None:
    # The client keeps the slash line; memory keys on what the client keeps, so the next turn finds the
    # prompt the line ran and the results of the turn it started.
    upstream.script(Turn(calls=[Call(READER, {"uri": "note://1"})]), Turn(content="Note one says hello."))
    first = chat(library, "/review code=y", stream=False)
    call, result = upstream.chat_requests()[1]["messages"][-2:]
    upstream.script(Turn(content="Yes."))
    history = [{"role": "user", "content": "/review code=y"}, {"role": "assistant", "content": first}]
    chat(library, "is that all?", stream=False, history=history)
    assert upstream.chat_requests()[0]["messages"][1:] == [
        {"role": "user", "content": "Review this code:\ny"},
        {"role": "assistant", "content": "I will look for bugs first."},
        {"role": "user", "content": "Start with the worst one."},
        call, result, {"role": "assistant", "content": "Note one says hello."},
        {"role": "user", "content": "is that all?"}]
    assert json.loads(result["content"])["data"] == "The text of note 1."
