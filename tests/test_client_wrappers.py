"""The person's own words past what their client wraps around them (issue 45's C5): Claude Code puts a
`<system-reminder>` block into the user's message (always into the first), so `/prompts` as a first message was
answered by the model and a wrapped "yes" was read as something else. Open WebUI writes its RAG template before
the person's words when a chat has files or web results, so such a message was taken for one of its background
tasks and got no tools.

Driven by the official clients over real HTTP: Claude Code's door (Anthropic's Messages, the `anthropic` SDK)
and Open WebUI's (Chat Completions, the `openai` SDK), with real stdio MCP servers: `library` (prompts), `files`
(`delete_note` asks first) and `asks` (a server's question). The model is never sent anything but what the
client sent, wrappers included.
"""

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn

REMINDER = ("<system-reminder>\nAs you answer the user's questions, you can use the following context:\n"
            "# important-instruction-reminders\nDo what has been asked; nothing more, nothing less.\n"
            "</system-reminder>")
# Open WebUI 0.12's default RAG template, as it puts it before the person's message (RAG_TEMPLATE).
RAG = ("### Task:\nRespond to the user query using the provided context, incorporating inline citations in the "
       "format [id] **only when the <source> tag includes an explicit id attribute**.\n\n### Guidelines:\n"
       "- If you don't know the answer, clearly state that.\n\n<context>\n<source id=\"1\" name=\"notes.txt\">"
       "Milk, eggs.</source>\n</context>\n")


@pytest.fixture(scope="module")
def wrapped(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    servers = {name: stdio_entry(f"{name}.py") for name in ("library", "files", "asks")}
    with running_gateway(tmp_path_factory.mktemp("wrapped"), servers, ready=tuple(servers),
                         upstream_url=f"{upstream.url}/v1") as gateway:
        yield gateway


def claude(gateway: Gateway, messages: list[Any]) -> anthropic.types.Message:
    client = anthropic.Anthropic(base_url=gateway.url, api_key="sk-any", max_retries=0)
    with client.messages.stream(model=MODEL, max_tokens=1000, messages=messages) as stream:
        return stream.get_final_message()


def text_of(message: anthropic.types.Message) -> str:
    return "".join(block.text for block in message.content if block.type == "text")


def as_claude_code(words: str, *, blocks: bool) -> dict[str, Any]:
    """A user message as Claude Code sends it: its reminder first, as a block of its own or in the same text."""
    if blocks:
        return {"role": "user", "content": [{"type": "text", "text": REMINDER}, {"type": "text", "text": words}]}
    return {"role": "user", "content": f"{REMINDER}\n\n{words}"}


@pytest.mark.parametrize("blocks", [True, False], ids=["blocks", "one-text"])
def test_claude_codes_first_message_runs_a_slash_command(
    wrapped: Gateway, upstream: FakeUpstream, blocks: bool
) -> None:
    upstream.script()
    listed = claude(wrapped, [as_claude_code("/prompts", blocks=blocks)])
    assert "`/greet name=… [style=…]`: Greets someone." in text_of(listed)
    assert upstream.chat_requests() == []  # answered by the gateway, not the model
    upstream.script(Turn(content="Hello, Ada!"))
    assert text_of(claude(wrapped, [as_claude_code("/greet name=Ada", blocks=blocks)])) == "Hello, Ada!"
    [request] = upstream.chat_requests()
    assert request["messages"][-1] == {"role": "user", "content": "Write a plain greeting for Ada."}


@pytest.mark.parametrize("blocks", [True, False], ids=["blocks", "one-text"])
def test_a_yes_claude_code_wrapped_runs_the_call(wrapped: Gateway, upstream: FakeUpstream, blocks: bool) -> None:
    note = f"wrapped-{blocks}"
    upstream.script(Turn(content="Writing it.", calls=[Call("files__write_note", {"name": note, "text": "milk"})]),
                    Turn(content="Deleting it.", calls=[Call("files__delete_note", {"name": note})]))
    history: list[Any] = [as_claude_code(f"Write the note {note}, then delete it.", blocks=blocks)]
    asked = claude(wrapped, history)
    assert "needs your approval" in text_of(asked)
    upstream.script(Turn(content="Deleted."))
    done = claude(wrapped, [*history, {"role": "assistant", "content": asked.content},
                            as_claude_code("yes", blocks=blocks)])
    assert text_of(done) == "Deleted."
    [request] = upstream.chat_requests()
    results = [json.loads(m["content"])["data"] for m in request["messages"] if m["role"] == "tool"]
    assert results == [{"result": f"wrote '{note}'"}, {"result": f"deleted '{note}'"}]
    [first] = [m for m in request["messages"] if m["role"] == "user"]  # the yes never reaches the model
    assert REMINDER in first["content"]  # and the message it does see is as the client sent it


def test_an_answer_claude_code_wrapped_answers_the_servers_question(wrapped: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="Booking.", calls=[Call("asks__book_table", {"restaurant": "Luigi"})]))
    history: list[Any] = [as_claude_code("Book Luigi.", blocks=True)]
    asked = claude(wrapped, history)
    assert "party_size" in text_of(asked)
    upstream.script(Turn(content="Booked for four."))
    done = claude(wrapped, [*history, {"role": "assistant", "content": asked.content},
                            as_claude_code("party_size: 4\ntime: 19:30", blocks=True)])
    assert text_of(done) == "Booked for four."
    tool = upstream.chat_requests()[0]["messages"][-1]
    assert json.loads(tool["content"])["data"] == {"result": "booked Luigi for 4 at 19:30"}


def test_open_webuis_rag_template_wraps_a_chat_not_a_background_task(
    wrapped: Gateway, upstream: FakeUpstream
) -> None:
    upstream.script(Turn(content="You need milk and eggs."))
    asked = f"{RAG}\nWhat is on my list?"
    wrapped.client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": asked}])
    [request] = upstream.chat_requests()
    assert "files__write_note" in [tool["function"]["name"] for tool in request["tools"]]  # a chat: the tools offered
    assert request["messages"][-1] == {"role": "user", "content": asked}  # as Open WebUI sent it


def test_open_webuis_rag_template_around_a_slash_command(wrapped: Gateway, upstream: FakeUpstream) -> None:
    upstream.script()
    answer = wrapped.client().chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": f"{RAG}\n/prompts"}])
    assert "`/greet name=… [style=…]`" in (answer.choices[0].message.content or "")
    assert upstream.chat_requests() == []
