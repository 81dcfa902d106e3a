"""Slash commands in any chat client: a user message that is only `/name arg=value ...` runs an MCP prompt
(only, past what the client wraps around the person's words: clients.py).

The prompt's messages stand in for that message before the upstream sees it (the client keeps its slash
line, and the memory keys on what the client sent). What needs no model is answered by the gateway
itself, as an ordinary assistant message: `/prompts` (or `/help`), a missing or unknown argument, an
unknown prompt with the closest names, a prompt its server failed to give, and `arg=<partial>?`, which
lists the server's completions for that argument.

Values with spaces are quoted (`/summarize topic="solar power"`); a prompt with one argument also takes
its value bare (`/review print(1/0)`). Words that are not all `arg=value` after the name of a prompt with
no or several arguments get the usage, as a missing argument does: typed for a prompt, they must never
reach the model unread. A line that merely starts with a slash (`/usr/bin/env is what?`, `/nope words`)
is not a command: the name allows no slash, and a name no prompt has takes only `arg=value` words. Words
are read as a POSIX shell reads them (`shlex.split`), in linear time, with typographic quotes as quotes:
Open WebUI's editor turns `"` into `”` or `“` as it is typed. A line of more than COMMAND_CHARS characters
is taken whole as a bare value, its words unread.
"""

import difflib
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from app.chat.clients import own_words
from app.chat.events import Finished, LoopEvent, Started
from app.chat.ports import ReplyMemory
from app.mcp.prompts import PromptBook, PromptEntry, PromptFailed, PromptResult, has_images, openai_messages
from app.openai.markup import TextDelta
from app.openai.wire import Message

LIST_COMMANDS = frozenset({"prompts", "help"})
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]*")
_COMMAND_START = re.compile(r"\s*/")
_ARGUMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]*)=(.*)", re.DOTALL)
# Past this, a line is no list of arguments but a pasted text (`/review <a file>`): reading a megabyte's
# words held the event loop for a second, and no prompt has that many arguments.
COMMAND_CHARS = 100_000
# A word as `shlex.split` reads one: bare characters, `\x`, '...' and "..." (with \" and \\), run together.
# Any of “ ” " opens and closes a double-quoted value, any of ‘ ’ ' a single-quoted one: editors write
# `city=”New York”` (a quote after a letter is a closing one to them), and a value may mix them (one quote
# typed, the other pasted or fixed by hand). The other kind inside stays as it is (`“Val d’Isère”`).
# Possessive, so that an unclosed quote fails once instead of being retried from every character.
_WORD = re.compile(r"""(?:[^ \t\r\n'‘’"“”\\]++|\\.|['‘’][^'‘’]*+['‘’]|["“”](?:[^"“”\\]++|\\.)*+["“”])++""",
                   re.DOTALL)
_PIECE = re.compile(r'''\\(.)|['‘’]([^'‘’]*+)['‘’]|["“”]((?:[^"“”\\]++|\\.)*+)["“”]''', re.DOTALL)
_QUOTED_ESCAPE = re.compile(r'\\([\\"“”])')
_QUOTES = frozenset("'‘’\"“”\\")
# A word that names an argument: a line starting with one was meant as arguments, however it goes on.
_ARGUMENT_START = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*=")
_SPACES = re.compile(r"[ \t\r\n]*+")


class PromptSource(Protocol):
    @property
    def prompt_book(self) -> PromptBook: ...

    async def get_prompt(self, entry: PromptEntry, arguments: dict[str, str]) -> PromptResult: ...

    async def complete(self, entry: PromptEntry, argument: str, partial: str, context: dict[str, str]
                       ) -> list[str]: ...


@dataclass(frozen=True)
class SlashCommand:
    name: str
    arguments: dict[str, str]
    bare: str | None = None  # the words after the name, as typed, when they are not all `arg=value`
    problem: str | None = None  # why the words could not be read (an unclosed quote)

    @property
    def meant_as_arguments(self) -> bool:
        """The words start with `arg=`: arguments typed wrong, not a value or a sentence."""
        return self.bare is not None and _ARGUMENT_START.match(self.bare) is not None


@dataclass(frozen=True)
class Answer:
    """What the gateway answers itself, without the model."""

    text: str


@dataclass(frozen=True)
class Expansion:
    """The prompt's messages, to stand in for the slash line."""

    messages: tuple[Message, ...]
    command: str  # the prompt's command, for the log line


def read_command(messages: Sequence[Message]) -> SlashCommand | None:
    """The slash command the last message is, if it is a user message that is nothing else, past what the client
    wrapped around it (clients.py: Claude Code's reminders)."""
    last = messages[-1] if messages else None
    if not isinstance(last, dict) or last.get("role") != "user":
        return None
    text = own_words(last.get("content"))
    if not _COMMAND_START.match(text):  # before stripping: a copy of a 40 MB message cost 50 ms of the loop
        return None
    text = text.strip()
    head, _, rest = text[1:].partition(" ")
    head, _, first_line_rest = head.partition("\n")
    rest = f"{first_line_rest} {rest}".strip()
    if not _NAME.fullmatch(head):
        return None
    if len(rest) > COMMAND_CHARS:
        return SlashCommand(head, {}, bare=rest)
    words = _split(rest)
    if words is None:
        return SlashCommand(head, {}, bare=rest, problem="a quote is not closed")
    arguments: dict[str, str] = {}
    for word in words:
        matched = _ARGUMENT.fullmatch(word)
        if matched is None:
            return SlashCommand(head, {}, bare=rest)  # run_command decides what the words are, by the prompt
        arguments[matched.group(1)] = matched.group(2)
    return SlashCommand(head, arguments)


def _split(line: str) -> list[str] | None:
    """`shlex.split(line)` in linear time (shlex builds each word a character at a time: quadratic on a
    long one); None where shlex raises: a quote not closed, or a backslash at the end."""
    words: list[str] = []
    position = _SPACES.match(line).end()  # type: ignore[union-attr]  # matches everywhere, even empty
    while position < len(line):
        word = _WORD.match(line, position)
        end = word.end() if word else position
        if end == position or (end < len(line) and line[end] not in " \t\r\n"):
            return None  # what stopped the word is an unclosed quote or a lone backslash
        words.append(_unquoted(line[position:end]))
        position = _SPACES.match(line, end).end()  # type: ignore[union-attr]
    return words


def _unquoted(word: str) -> str:
    if _QUOTES.isdisjoint(word):
        return word
    return _PIECE.sub(_piece, word)


def _piece(piece: re.Match[str]) -> str:
    escaped, single, double = piece.groups()
    if escaped is not None:
        return escaped
    if single is not None:
        return single
    return _QUOTED_ESCAPE.sub(r"\1", double)  # inside "...", only \" and \\ are escapes; \x stays as it is


async def run_command(
    command: SlashCommand, prompts: PromptSource, sees_images: Callable[[], Awaitable[bool]] | None,
    servers: Callable[[str], bool] = lambda server: True,
) -> Answer | Expansion | None:
    """The command answered or expanded; None when it names no prompt and the servers offer none (the
    message then goes to the model as typed). `servers`: those whose prompts the request's user chose (a
    toolset, the tools header), as its tools."""
    book = prompts.prompt_book.select(servers)
    entry = book.find(command.name)
    if entry is None:
        if command.name in LIST_COMMANDS and command.bare is None and not command.arguments:
            return Answer(_list(book))
        if not book.entries or (command.bare is not None and not command.meant_as_arguments):
            return None  # not meant for us: no prompts at all, or a sentence that starts with a slash
        return Answer(_not_found(book, command.name))
    arguments = dict(command.arguments)
    if command.bare is not None:
        names = entry.argument_names
        if len(names) != 1 or command.bare.startswith(f"{names[0]}="):
            return Answer(_how_to_pass(entry, command.problem))
        arguments = {names[0]: command.bare}  # a value with quotes or `=` in it is still one value
    unknown = [name for name in arguments if name not in entry.argument_names]
    if unknown:
        return Answer(f"`/{entry.command}` has no argument {', '.join(f'`{n}`' for n in unknown)}. "
                      f"{_usage_line(entry)}")
    asked = next((name for name, value in arguments.items() if value.endswith("?")), None)
    if asked is not None:
        return await _completions(prompts, entry, asked, arguments)
    missing = [name for name in entry.required if not arguments.get(name)]
    if missing:
        return Answer(f"`/{entry.command}` needs {', '.join(f'`{n}`' for n in missing)}. {_usage_line(entry)}")
    try:
        result = await prompts.get_prompt(entry, arguments)
    except PromptFailed as exc:
        return Answer(f"The prompt `/{entry.command}` failed: {exc}")
    images = has_images(result) and sees_images is not None and await sees_images()
    messages = openai_messages(result, images)
    if not messages:
        return Answer(f"The prompt `/{entry.command}` gave no messages.")
    return Expansion(tuple(messages), entry.command)


async def answered(
    text: str, messages: Sequence[Message], memory: ReplyMemory | None
) -> AsyncGenerator[LoopEvent, None]:
    """The gateway's own answer as the loop's events, so it streams or returns like any other; remembered
    first, so that the next turn leaves it and its slash line out of what the model sees."""
    if memory is not None:
        await memory.remember_reply(messages, text)
    yield Started()
    yield TextDelta(text)
    yield Finished("stop", None)


async def _completions(prompts: PromptSource, entry: PromptEntry, argument: str, arguments: dict[str, str]
                       ) -> Answer:
    partial = arguments[argument].removesuffix("?")
    context = {name: value for name, value in arguments.items() if name != argument}
    try:
        values = await prompts.complete(entry, argument, partial, context)
    except PromptFailed as exc:
        return Answer(f"No suggestions for `{argument}`: {exc}")
    if not values:
        return Answer(f"No suggestions for `{argument}` of `/{entry.command}`. {_usage_line(entry)}")
    shown = "\n".join(f"- `{value}`" for value in values[:20])
    return Answer(f"Values for `{argument}` of `/{entry.command}`:\n{shown}")


def _list(book: PromptBook) -> str:
    commands = book.listed()
    if not commands:
        return "No MCP server offers prompts."
    lines = ["Prompts from the MCP servers. Send one as a message, with quotes around values that have "
             "spaces, e.g. `/name arg=\"some value\"`:"]
    for entry in commands:
        description = (entry.prompt.description or entry.prompt.title or "").strip().splitlines()
        lines.append(f"- `{entry.usage()}`" + (f": {description[0]}" if description else ""))
    return "\n".join(lines)


def _not_found(book: PromptBook, name: str) -> str:
    if name in book.shared:
        return (f"Several servers offer a prompt `{name}`: "
                f"{', '.join(f'`/{c}`' for c in book.shared[name])}. Send one of those.")
    close = difflib.get_close_matches(name, [e.command for e in book.listed()], n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(f'`/{c}`' for c in close)}?" if close else ""
    return f"There is no prompt `/{name}`.{hint} Send `/prompts` for the list."


def _how_to_pass(entry: PromptEntry, problem: str | None) -> str:
    """What the user is told when the words after a prompt's name are no arguments (nor its one value)."""
    if problem is not None:
        return f"`/{entry.command}`: {problem}. {_usage_line(entry)}"
    names = entry.argument_names
    if not names:
        return f"`/{entry.command}` takes no arguments. {_usage_line(entry)}"
    needs = f"`/{entry.command}` needs {', '.join(f'`{n}`' for n in entry.required)}. " if entry.required else ""
    return (f"{needs}Give each argument as `name=value`, with quotes around a value that has spaces "
            f"(`{names[0]}=\"two words\"`). {_usage_line(entry)}")


def _usage_line(entry: PromptEntry) -> str:
    arguments = entry.prompt.arguments or []
    if not arguments:
        return f"Usage: `/{entry.command}` (no arguments)."
    described = "; ".join(
        f"`{a.name}` ({'required' if a.required else 'optional'})" + (f": {a.description}" if a.description else "")
        for a in arguments
    )
    return f"Usage: `{entry.usage()}`. Arguments: {described}."
