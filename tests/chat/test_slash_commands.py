"""What a slash line is, and what the gateway answers for it, against a prompt source in plain Python."""

from typing import Any

import pytest
from mcp.types import GetPromptResult, Prompt, PromptArgument, PromptMessage, TextContent

from app.chat.slash_commands import Answer, Expansion, SlashCommand, read_command, run_command
from app.mcp.prompts import PromptBook, PromptEntry, PromptFailed, build_prompt_book


def user(content: Any) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "be brief"}, {"role": "user", "content": content}]


@pytest.mark.parametrize(("text", "command"), [
    ("/prompts", SlashCommand("prompts", {})),
    ("  /greet name=Ada  ", SlashCommand("greet", {"name": "Ada"})),
    ('/greet name="Ada Lovelace" style=\'very warm\'', SlashCommand("greet", {"name": "Ada Lovelace",
                                                                               "style": "very warm"})),
    ("/github.review pr=42", SlashCommand("github.review", {"pr": "42"})),
    ("/greet name=A?", SlashCommand("greet", {"name": "A?"})),
    ("/greet\nname=Ada", SlashCommand("greet", {"name": "Ada"})),
    ("/review print(1/0)", SlashCommand("review", {}, bare="print(1/0)")),
    ('/greet name="Ada', SlashCommand("greet", {}, bare='name="Ada', problem="a quote is not closed")),
    ("/greet query=a=b", SlashCommand("greet", {"query": "a=b"})),
    ("/greet name=Ada and more words", SlashCommand("greet", {}, bare="name=Ada and more words")),
], ids=["list", "trimmed", "quoted", "qualified", "completion", "newline", "bare", "unclosed", "equals-in-value",
        "words-after-arguments"])
def test_a_slash_line_is_read_as_a_command(text: str, command: SlashCommand) -> None:
    assert read_command(user(text)) == command


# Open WebUI's editor turns a typed `"` into `”` after a letter and `“` after a space (`'` into `’`/`‘`).
@pytest.mark.parametrize(("text", "arguments"), [
    ("/greet name=”Ada Lovelace”", {"name": "Ada Lovelace"}),
    ("/greet name=“Ada Lovelace” style=‘very warm’", {"name": "Ada Lovelace", "style": "very warm"}),
    ("/greet name=’Ada Lovelace’", {"name": "Ada Lovelace"}),
    ('/greet name="Ada Lovelace” style=\'warm’', {"name": "Ada Lovelace", "style": "warm"}),
    ("/greet name=“Val d’Isère” style=‘“warm”’", {"name": "Val d’Isère", "style": "“warm”"}),
    ("/greet name=“a \\” b”", {"name": "a ” b"}),
], ids=["closing-pair", "opening-and-closing", "single-closing-pair", "mixed", "the-other-kind-inside", "escaped"])
def test_typographic_quotes_are_quotes(text: str, arguments: dict[str, str]) -> None:
    assert read_command(user(text)) == SlashCommand("greet", arguments)


@pytest.mark.parametrize("messages", [
    user("what is /greet?"),
    user("/usr/bin/env is what?"),
    user("/"),
    [{"role": "assistant", "content": "/greet name=Ada"}],
    [],
], ids=["not-first", "path", "slash-alone", "not-a-user", "no-messages"])
def test_other_messages_are_no_commands(messages: list[dict[str, Any]]) -> None:
    assert read_command(messages) is None


def test_text_parts_are_read_like_a_string() -> None:
    parts = [{"type": "text", "text": "/greet "}, {"type": "text", "text": "name=Ada"}]
    assert read_command(user(parts)) == SlashCommand("greet", {"name": "Ada"})


GREET = Prompt(name="greet", description="Greets someone.", arguments=[
    PromptArgument(name="name", required=True, description="Who"), PromptArgument(name="style")])
REVIEW = Prompt(name="review", arguments=[PromptArgument(name="code", required=True)])


class Source:
    def __init__(self, book: PromptBook, fail: str | None = None) -> None:
        self.prompt_book, self.fail = book, fail
        self.asked: list[tuple[str, dict[str, str]]] = []

    async def get_prompt(self, entry: PromptEntry, arguments: dict[str, str]) -> GetPromptResult:
        self.asked.append((entry.command, arguments))
        if self.fail:
            raise PromptFailed(self.fail)
        text = " ".join(f"{k}={v}" for k, v in sorted(arguments.items()))
        return GetPromptResult(messages=[PromptMessage(role="user", content=TextContent(type="text", text=text))])

    async def complete(self, entry: PromptEntry, argument: str, partial: str, context: dict[str, str]) -> list[str]:
        return [name for name in ("Ada", "Alan", "Grace") if name.startswith(partial)]


def book() -> PromptBook:
    return build_prompt_book({"people": [GREET], "code": [REVIEW], "other": [Prompt(name="review")]})


async def run(text: str, source: Source | None = None) -> Answer | Expansion | None:
    source = source or Source(book())
    command = read_command(user(text))
    assert command is not None
    return await run_command(command, source, None)


@pytest.mark.anyio
async def test_a_prompt_is_expanded_with_its_arguments() -> None:
    source = Source(book())
    assert await run("/greet name=Ada", source) == Expansion(({"role": "user", "content": "name=Ada"},), "greet")
    assert await run("/code.review x", source) == Expansion(({"role": "user", "content": "code=x"},), "code.review")
    assert source.asked == [("greet", {"name": "Ada"}), ("code.review", {"code": "x"})]


@pytest.mark.anyio
@pytest.mark.parametrize(("text", "words"), [
    ("/greet", ["`/greet` needs `name`", "`name` (required): Who; `style` (optional)"]),
    ("/greet name=Ada mood=sad", ["has no argument `mood`"]),
    ("/review code=x", ["Several servers offer a prompt `review`: `/code.review`, `/other.review`"]),
    ("/gret", ["There is no prompt `/gret`. Did you mean `/greet`?"]),
    ("/prompts", ["- `/greet name=… [style=…]`: Greets someone.", "- `/code.review code=…`", "- `/other.review`"]),
    ("/greet name=A?", ["- `Ada`\n- `Alan`"]),
    ("/greet name=Z?", ["No suggestions for `name`"]),
])
async def test_what_the_gateway_answers_itself(text: str, words: list[str]) -> None:
    source = Source(book())
    answer = await run(text, source)
    assert isinstance(answer, Answer)
    for part in words:
        assert part in answer.text
    assert source.asked == []


@pytest.mark.anyio
@pytest.mark.parametrize(("text", "words"), [
    ("/greet Ada", ["`/greet` needs `name`. Give each argument as `name=value`", "`name` (required)"]),
    ("/greet name=Ada Lovelace", ["`/greet` needs `name`", '`name="two words"`']),
    ("/greet name=Ada style", ["`/greet` needs `name`"]),
    ("/greet is what command?", ["`/greet` needs `name`"]),
    ("/review code=x y", ["`/review` needs `code`"]),
    ('/review code="x', ["`/review`: a quote is not closed. Usage: `/review code=…`"]),
    ("/gret name=Ada Lovelace", ["There is no prompt `/gret`. Did you mean `/greet`?"]),
    ("/nap now", ["`/nap` takes no arguments. Usage: `/nap` (no arguments)."]),
], ids=["bare-value-of-two", "unquoted-spaces", "a-word-after", "a-sentence", "one-argument-named-then-words",
        "one-argument-unclosed", "unknown-prompt-with-arguments-typed-wrong", "no-arguments"])
async def test_words_for_a_prompt_that_are_no_arguments_get_its_usage(text: str, words: list[str]) -> None:
    source = Source(build_prompt_book({"people": [GREET], "code": [REVIEW], "rest": [Prompt(name="nap")]}))
    answer = await run(text, source)
    assert isinstance(answer, Answer), answer
    for part in words:
        assert part in answer.text
    assert source.asked == []


@pytest.mark.anyio
@pytest.mark.parametrize(("text", "value"), [
    ("/review print(1/0)", "print(1/0)"),
    ("/review don't do x=1", "don't do x=1"),
    ("/review it’s “quoted”", "it’s “quoted”"),
    ("/review f(x=1, y=2)", "f(x=1, y=2)"),
], ids=["plain", "an-apostrophe-and-equals", "typographic", "code-with-equals"])
async def test_a_prompt_of_one_argument_takes_any_words_as_its_value(text: str, value: str) -> None:
    source = Source(build_prompt_book({"code": [REVIEW]}))
    assert await run(text, source) == Expansion(({"role": "user", "content": f"code={value}"},), "review")


@pytest.mark.anyio
async def test_a_failing_prompt_is_answered_with_why() -> None:
    answer = await run("/greet name=Ada", Source(book(), fail="MCP server 'people' is restarting."))
    assert answer == Answer("The prompt `/greet` failed: MCP server 'people' is restarting.")


@pytest.mark.anyio
async def test_without_prompts_only_the_list_is_answered() -> None:
    empty = Source(PromptBook())
    assert await run("/greet name=Ada", empty) is None
    assert await run("/prompts", empty) == Answer("No MCP server offers prompts.")
    assert await run("/gret some words", Source(book())) is None  # a sentence, not a command
    assert await run("/shrug it's fine", Source(book())) is None  # an apostrophe is no unclosed quote there
