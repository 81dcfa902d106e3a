"""Inputs built to make the gateway work hard, through a running gateway: each is answered at once (the
deadline is a hang guard; on fe3fc42 these took 16 s to minutes with the event loop held), or refused with a
400 that says what is wrong. Figures: bench/hostile_inputs.py."""

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import FakeUpstream, Turn

DEADLINE = 10.0  # seconds; what these requests take now is milliseconds (bench/hostile_inputs.py)
MB = 1_000_000
OPEN_TRACE = '<details type="tool_calls">'


def send(gateway: Gateway, messages: list[dict[str, Any]], stream: bool = False, **extra: Any) -> httpx.Response:
    body = {"model": "m", "messages": messages, "stream": stream, **extra}
    return httpx.post(f"{gateway.url}/v1/chat/completions", json=body, timeout=DEADLINE)


def answer_text(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text[:500]
    return str(response.json()["choices"][0]["message"]["content"])


@pytest.fixture(scope="module", params=["sqlite", "none"], ids=["memory-on", "memory-off"])
def plain(request: pytest.FixtureRequest, upstream: FakeUpstream,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    directory = tmp_path_factory.mktemp("hostile")
    state = f"sqlite:///{directory / 'state.db'}" if request.param == "sqlite" else "none"
    with running_gateway(directory, None, upstream_url=f"{upstream.url}/v1", state_url=state) as gateway:
        yield gateway


@pytest.mark.parametrize("size", [232_000, MB], ids=["232KB", "1MB"])
def test_unclosed_trace_openings_are_no_work(plain: Gateway, upstream: FakeUpstream, size: int) -> None:
    """The audit's ReDoS: an assistant turn of nothing but details openings (31 s at 232 KB on fe3fc42)."""
    upstream.script(Turn(content="fine"))
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": OPEN_TRACE * (size // 29)},
               {"role": "user", "content": "and?"}]
    assert answer_text(send(plain, history)) == "fine"
    sent = upstream.chat_requests()[-1]["messages"]
    assert sent[1]["content"] == history[1]["content"]  # openings never closed are no trace: left as they are


def test_an_attribute_without_value_in_a_trace_is_no_work(plain: Gateway, upstream: FakeUpstream) -> None:
    """A details block whose opening tag holds one long word with no `=` (37 s at 80 KB on fe3fc42)."""
    upstream.script(Turn(content="fine"))
    block = f'{OPEN_TRACE[:-1]} id="c1" name="echo" {"w" * MB} result="&quot;r&quot;">\n</details>'
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": block},
               {"role": "user", "content": "and?"}]
    assert answer_text(send(plain, history)) == "fine"


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


@pytest.fixture(scope="module")
def crowded(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """60 MCP tools (five servers of twelve) with a budget of 4: every request is ranked."""
    servers = {f"s{number}": stdio_entry("basic.py") for number in range(5)}
    with running_gateway(tmp_path_factory.mktemp("crowded"), servers, ready=tuple(servers),
                         upstream_url=f"{upstream.url}/v1", tool_budget=4) as gateway:
        yield gateway


def test_a_ten_megabyte_message_with_sixty_tools_is_ranked_at_once(crowded: Gateway, upstream: FakeUpstream) -> None:
    """13 s on fe3fc42 (a regular expression per tool over all of the text)."""
    upstream.script(Turn(content="read it"))
    text = "Please use get_weather on this report. " + "lorem ipsum dolor " * (10 * MB // 18)
    assert answer_text(send(crowded, [{"role": "user", "content": text}])) == "read it"
    offered = [tool["function"]["name"] for tool in upstream.chat_requests()[-1]["tools"]]
    assert len(offered) == 5 and all(f"s{n}__get_weather" in offered for n in range(5))  # named: pinned


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("where", ["seed", "nested"])
def test_an_integer_past_pythons_digit_limit_is_a_400(
    plain: Gateway, upstream: FakeUpstream, stream: bool, where: str
) -> None:
    huge = "9" * 5000
    extra = '"seed":' + huge if where == "seed" else '"metadata":{"a":[1,{"b":-' + huge + "}]}"
    body = f'{{"model":"m","messages":[{{"role":"user","content":"hi"}}],"stream":{str(stream).lower()},{extra}}}'
    upstream.script()
    response = httpx.post(f"{plain.url}/v1/chat/completions", content=body, timeout=DEADLINE,
                          headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text[:500]
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "invalid_number"
    assert "integer of 5,000 digits" in error["message"]
    assert upstream.chat_requests() == []


def test_an_integer_within_the_limit_is_sent_on_as_it_is(plain: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="ok"))
    huge = "9" * 4300
    body = '{"model":"m","messages":[{"role":"user","content":"hi"}],"seed":' + huge + "}"
    response = httpx.post(f"{plain.url}/v1/chat/completions", content=body, timeout=DEADLINE,
                          headers={"Content-Type": "application/json"})
    assert answer_text(response) == "ok"
    assert upstream.chat_requests()[-1]["seed"] == int(huge)
