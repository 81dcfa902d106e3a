"""A user message's own words past what clients wrap around them (app/chat/own_words.py), and the readers that
take a message as meant for the gateway reading them so: slash commands, a yes or no, a server's question's
answer, Open WebUI's background tasks. Pure tables."""

from typing import Any

import pytest

from app.chat.asking.approvals import Reply, read_reply
from app.chat.asking.questions import Accepted, Declined, answer_for
from app.chat.clients import is_background_task, own_words
from app.chat.slash_commands import SlashCommand, read_command

REMINDER = "<system-reminder>\nThe date is 2026-11-28. Do what has been asked.\n</system-reminder>"
CONTEXT = '<context>\n<source id="1">Milk, eggs. A </context> in a source.</source>\n</context>\n'
RAG = f"### Task:\nRespond to the user query using the provided context.\n\n{CONTEXT}"
TITLE = "### Task:\nGenerate a concise title.\n### Chat History:\n<chat_history>\nUSER: see <context>x</context>\n" \
        "</chat_history>"


@pytest.mark.parametrize(("content", "words"), [
    ("plain words", "plain words"),
    (f"{REMINDER}\n\n/prompts", "\n\n/prompts"),
    (f"yes\n\n{REMINDER}", "yes\n\n"),  # anywhere in the message
    (f"{REMINDER}{REMINDER}no{REMINDER}", "no"),
    ([{"type": "text", "text": REMINDER}, {"type": "image_url", "image_url": {"url": "data:,"}},
      {"type": "text", "text": "always"}], "always"),
    ("<system-reminder>never closed yes", "<system-reminder>never closed yes"),  # nothing to leave out
    ("<system-reminder>a</system-reminder> yes <system-reminder>b", " yes <system-reminder>b"),
    (f"{RAG}\nWhat is on my list?", "\n\nWhat is on my list?"),  # after the last </context>
    (f"  {RAG}\n<user_query>\nyes\n</user_query>\nyes", "\nyes"),  # an older template repeats the query first
    (TITLE, TITLE),  # a background task quotes the chat: it stays whole
    ("### Task:\nGenerate three tags.", "### Task:\nGenerate three tags."),
    ("### Task: no context closed <context> x", "### Task: no context closed <context> x"),
    (f"What does {RAG} mean?", f"What does {RAG} mean?"),  # only a message that starts with the template
    (None, ""),
])
def test_the_persons_own_words(content: Any, words: str) -> None:
    assert own_words(content) == words


def test_a_message_nothing_wraps_is_not_copied() -> None:
    text = "x" * 1000
    assert own_words(text) is text


@pytest.mark.parametrize(("text", "reply"), [
    (f"{REMINDER}\n\nyes", Reply.YES),
    (f"{REMINDER}\n\nalways", Reply.ALWAYS),
    (f"{RAG}\nno", Reply.NO),
    (f"{REMINDER}\n\nyes, and also write a poem about it", Reply.OTHER),
])
def test_a_wrapped_reply_is_read_as_the_person_wrote_it(text: str, reply: Reply) -> None:
    assert read_reply(text) is reply


def test_a_wrapped_answer_is_read_as_the_person_wrote_it() -> None:
    form = {"message": "How many?", "requestedSchema": {
        "type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}}
    assert answer_for(f"{REMINDER}\n\n4", form) == Accepted({"count": 4})
    assert answer_for(f"{REMINDER}\n\ndecline", form) == Declined()
    assert answer_for(f"{REMINDER}\ndone", {"mode": "url", "message": "Sign in", "url": "https://x.test"}) \
        == Accepted({})


def test_a_wrapped_slash_line_is_a_command() -> None:
    message = {"role": "user", "content": [{"type": "text", "text": REMINDER}, {"type": "text", "text": "/greet a=b"}]}
    assert read_command([message]) == SlashCommand("greet", {"a": "b"})
    assert read_command([{"role": "user", "content": f"{REMINDER}\n\nhello /greet"}]) is None


@pytest.mark.parametrize(("text", "task"), [(TITLE, True), (f"{RAG}\nWhat is on my list?", False)])
def test_a_rag_wrapped_message_is_no_background_task(text: str, task: bool) -> None:
    assert is_background_task([{"role": "user", "content": text}]) is task
