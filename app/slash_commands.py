"""Slash commands in any chat client: a user message that is only `/name arg=value ...` runs an MCP prompt.

The prompt's messages stand in for that message before the upstream sees it (the client keeps its slash
line, and the memory keys on what the client sent). What needs no model is answered by the gateway
itself, as an ordinary assistant message: `/prompts` (or `/help`), a missing or unknown argument, an
unknown prompt with the closest names, a prompt its server failed to give, and `arg=<partial>?`, which
lists the server's completions for that argument.

Values with spaces are quoted (`/summarize topic="solar power"`); a prompt with one argument also takes
its value bare (`/review print(1/0)`). A line that merely starts with a slash (`/usr/bin/env is what?`)
is not a command: the name allows no slash, and every other word must be `arg=value`.
"""

import difflib
import re
import shlex
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from app.loop import Finished, LoopEvent, Started
from app.mcp.prompts import PromptBook, PromptEntry, PromptFailed, has_images, openai_messages
from app.openai.markup import TextDelta
from app.openai.schemas import content_text

LIST_COMMANDS = frozenset({"prompts", "help"})
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]*")
_ARGUMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]*)=(.*)", re.DOTALL)


class PromptSource(Protocol):
    @property
    def prompt_book(self) -> PromptBook: ...

    async def get_prompt(self, entry: PromptEntry, arguments: dict[str, str]) -> Any: ...

    async def complete(self, entry: PromptEntry, argument: str, partial: str, context: dict[str, str]
                       ) -> list[str]: ...


@dataclass(frozen=True)
class SlashCommand:
    name: str
    arguments: dict[str, str]
    bare: str | None = None  # the words after the name when none is `arg=value`
    problem: str | None = None  # why the words could not be read (an unclosed quote)


@dataclass(frozen=True)
class Answer:
    """What the gateway answers itself, without the model."""

    text: str


@dataclass(frozen=True)
class Expansion:
    """The prompt's messages, to stand in for the slash line."""

    messages: tuple[dict[str, Any], ...]
    command: str  # the prompt's command, for the log line


def read_command(messages: list[dict[str, Any]]) -> SlashCommand | None:
    """The slash command the last message is, if it is a user message that is nothing else."""
    last = messages[-1] if messages else None
    if not isinstance(last, dict) or last.get("role") != "user":
        return None
    text = content_text(last.get("content")).strip()
    if not text.startswith("/"):
        return None
    head, _, rest = text[1:].partition(" ")
    head, _, first_line_rest = head.partition("\n")
    rest = f"{first_line_rest} {rest}".strip()
    if not _NAME.fullmatch(head):
        return None
    try:
        words = shlex.split(rest)
    except ValueError:
        return SlashCommand(head, {}, problem="a quote is not closed")
    arguments: dict[str, str] = {}
    for word in words:
        matched = _ARGUMENT.fullmatch(word)
        if matched is None:
            return SlashCommand(head, {}, bare=rest) if not any(_ARGUMENT.fullmatch(w) for w in words) else None
        arguments[matched.group(1)] = matched.group(2)
    return SlashCommand(head, arguments)


async def run_command(
    command: SlashCommand, prompts: PromptSource, sees_images: Callable[[], Awaitable[bool]] | None
) -> Answer | Expansion | None:
    """The command answered or expanded; None when it names no prompt and the servers offer none (the
    message then goes to the model as typed)."""
    book = prompts.prompt_book
    entry = book.find(command.name)
    if entry is None:
        if command.name in LIST_COMMANDS and command.bare is None and not command.arguments:
            return Answer(_list(book))
        if not book.entries or command.bare is not None:
            return None  # not meant for us: no prompts at all, or words that are no arguments
        return Answer(_not_found(book, command.name))
    if command.problem is not None:
        return Answer(f"`/{entry.command}`: {command.problem}. {_usage_line(entry)}")
    arguments = dict(command.arguments)
    if command.bare is not None:
        if len(entry.argument_names) != 1:
            return None  # words, not arguments: a sentence that starts with the prompt's name
        arguments = {entry.argument_names[0]: command.bare}
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


async def answered(text: str) -> AsyncIterator[LoopEvent]:
    """The gateway's own answer as the loop's events, so it streams or returns like any other."""
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


def _usage_line(entry: PromptEntry) -> str:
    arguments = entry.prompt.arguments or []
    if not arguments:
        return f"Usage: `/{entry.command}` (no arguments)."
    described = "; ".join(
        f"`{a.name}` ({'required' if a.required else 'optional'})" + (f": {a.description}" if a.description else "")
        for a in arguments
    )
    return f"Usage: `{entry.usage()}`. Arguments: {described}."
