"""Slash-command parsing on a megabyte line (issue 27's N4): shlex over `/name ` and a megabyte took 16-18 s on
fe3fc42, for every message starting that way, prompts or not. Past a bound a line is text, not arguments; a short
line still runs its prompt."""

from collections.abc import Iterator

import pytest

from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.security.conftest import MB, answer_text, send
from tests.support.fake_upstream import FakeUpstream, Turn


@pytest.mark.parametrize("text", ["/one " + "y" * MB, '/one "' + "q" * MB, "/one " + "z " * (MB // 2)],
                         ids=["word", "unclosed-quote", "many-words"])
def test_a_megabyte_slash_line_without_prompts_goes_to_the_model(
    plain: Gateway, upstream: FakeUpstream, text: str
) -> None:
    upstream.script(Turn(content="as typed"))
    assert answer_text(send(plain, [{"role": "user", "content": text}])) == "as typed"
    assert upstream.chat_requests()[-1]["messages"][-1]["content"] == text


@pytest.fixture(scope="module")
def prompting(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with running_gateway(tmp_path_factory.mktemp("prompting"), {"library": stdio_entry("library.py")},
                         ready=("library",), upstream_url=f"{upstream.url}/v1") as gateway:
        yield gateway


@pytest.mark.parametrize("text", ["/one " + "y" * MB, '/one "' + "q" * MB], ids=["no-such-prompt", "unclosed-quote"])
def test_a_megabyte_slash_line_with_prompts_is_answered(
    prompting: Gateway, upstream: FakeUpstream, text: str
) -> None:
    upstream.script(Turn(content="as typed"))
    answered = answer_text(send(prompting, [{"role": "user", "content": text}]))
    # Past COMMAND_CHARS a line is bare text, not arguments: /one is no prompt (the model gets it as typed).
    assert answered == "as typed"
    assert upstream.chat_requests()[-1]["messages"][-1]["content"] == text


@pytest.mark.parametrize("text", ['/greet name="' + "q" * MB, "/greet " + "‘x" * (MB // 2)],
                         ids=["unclosed-quote", "typographic-quotes"])
def test_a_megabyte_of_words_for_a_prompt_gets_its_usage_not_an_echo(
    prompting: Gateway, upstream: FakeUpstream, text: str
) -> None:
    # /greet has two arguments: bare text, however long, is no value of one, and the user is told how to pass them.
    upstream.script()
    answered = answer_text(send(prompting, [{"role": "user", "content": text}]))
    assert answered.startswith("`/greet` needs `name`") and len(answered) < 1000
    assert upstream.chat_requests() == []


def test_a_short_slash_line_still_runs_its_prompt(prompting: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="reviewed"))
    assert answer_text(send(prompting, [{"role": "user", "content": '/review code="print(1 / 0)"'}])) == "reviewed"
    assert any("print(1 / 0)" in str(m["content"]) for m in upstream.chat_requests()[-1]["messages"])
    assert "not closed" in answer_text(send(prompting, [{"role": "user", "content": '/greet name="Ada'}]))
