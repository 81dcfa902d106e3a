"""A server's question to the person (MCP elicitation): the words that ask it, and the person's next message read
as the answer the server expects. Pure: plain dicts and text, no SDK (app/chat never imports `mcp`).

`question_for` and `answer_for` take the request's params as JSON and pick the mode. A form question
(`requestedSchema`) lists its fields with what each takes; the person answers a one-field form
with just the value, and a larger one with one `name: value` line per field (name or title, any case) or a JSON
object. A URL question shows the link; "done" says the person finished there.

Decline and cancel: a reply that is only a decline word (`decline`, `no`, `skip`, ...) declines, only a cancel
word (`cancel`, `stop`, `never mind`, ...) cancels: the server learns the person said no, or walked away. A
one-field form whose field takes that very word (a yes/no field, or a choice with an option `no`) reads it as
the answer instead: "no" to "Really delete?" is an answer, not a refusal to answer. Anything else that does
not fit the form is `Invalid`, with words to show the person before asking again.
"""

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from app.chat.asking.question_fields import Field, Problem, Value, convert, describe, fields, sample, shown
from app.chat.clients import own_words
from app.openai.wire import JSONValue


@dataclass(frozen=True)
class Accepted:
    content: dict[str, Value]  # the form's values by property name; empty for a URL question (accept, no content)


@dataclass(frozen=True)
class Declined:
    pass


@dataclass(frozen=True)
class Cancelled:
    pass


@dataclass(frozen=True)
class Invalid:
    problem: str  # shown to the person, who is then asked again


Answer = Accepted | Declined | Cancelled | Invalid

_DECLINE = frozenset({"decline", "declined", "no", "nope", "n", "skip", "refuse", "deny", "no thanks", "reject"})
_CANCEL = frozenset({"cancel", "stop", "abort", "quit", "never mind", "nevermind", "forget it"})
_DONE = frozenset({"done", "finished", "ok", "okay", "yes", "ready", "signed in", "complete", "completed", "did it"})
_LONGEST_ANSWER = 10_000  # characters: a form's answer is short; a longer message is not one
_LONGEST_MESSAGE = 2_000  # characters of the server's message shown
_KEY_LINE = re.compile(r"\s*(?:[-*]\s+)?\**`?([^:=`*]+?)`?\**\s*[:=]\s*(.*)")
HOW_TO_REFUSE = "Or reply **decline** to refuse, or **cancel** to stop."


def question_for(params: Mapping[str, JSONValue], server: str | None) -> str:
    """The words for an elicitation request as the server sent it (its params as JSON: `mode`, `message`, and
    `requestedSchema` or `url`), so a waiting question can be kept as plain JSON and asked from it."""
    message = str(params.get("message") or "")
    if params.get("mode") == "url":
        return url_question(message, str(params.get("url") or ""), server)
    return form_question(message, _schema(params), server)


def answer_for(text: str, params: Mapping[str, JSONValue]) -> Answer:
    """The person's reply to the elicitation request `params` (as in `question_for`), read past what their client
    wrapped around it (clients.py)."""
    text = own_words(text)
    return read_url_answer(text) if params.get("mode") == "url" else read_answer(text, _schema(params))


def _schema(params: Mapping[str, JSONValue]) -> Mapping[str, JSONValue]:
    schema = params.get("requestedSchema")
    return schema if isinstance(schema, Mapping) else {}


def form_question(message: str, schema: Mapping[str, JSONValue], server: str | None) -> str:
    """The words that end the response: the server's question, its fields, and how to answer."""
    asked = fields(schema)
    lines = [_asks(server), "", _quoted(message), ""]
    lines += [describe(field) for field in asked]
    lines += ["", *_how_to_answer(asked), HOW_TO_REFUSE]
    return "\n".join(lines)


def url_question(message: str, url: str, server: str | None) -> str:
    """The words that end the response for a URL question: the message, the link, and how to go on."""
    # An autolink only when the address cannot break out of it; otherwise shown as code, to be copied.
    link = f"<{url}>" if re.fullmatch(r"https?://[^\s<>`]+", url) else f"`{url.replace('`', '%60')}`"
    return "\n".join([_asks(server), "", _quoted(message), "", f"Open this link: {link}", "",
                      "Reply **done** when you have finished there. " + HOW_TO_REFUSE])


def _asks(server: str | None) -> str:
    return f"The server **{server}** asks you:" if server else "A tool's server asks you:"


def _quoted(message: str) -> str:
    # An image in a server's words would be fetched by the person's browser as soon as it is shown.
    text = message.strip()[:_LONGEST_MESSAGE].replace("![", "!\\[") or "(no message)"
    return "\n".join(f"> {line}" for line in text.splitlines())


def _how_to_answer(asked: list[Field]) -> list[str]:
    if not asked:
        return ["Reply **yes** to go on."]
    if len(asked) == 1:
        field = asked[0]
        if field.kind == "boolean":
            return ["Reply **yes** or **no**."]
        return [f"Reply with the value, for example: `{sample(field)}`."]
    # Only what is needed or has a default: an example copied as it is must not agree to terms or give an
    # address on the person's behalf. `text`, so that a client does not offer to run the example as code.
    shown_fields = [field for field in asked if field.required or field.default is not None] or asked[:1]
    example = "\n".join(f"{field.name}: {sample(field)}" for field in shown_fields)
    lines = ["Reply with one line per field, `name: value` (or a JSON object), for example:", "", "```text", example,
             "```"]
    if not all(field.required and field.default is None for field in asked):
        lines += ["", "Optional fields may be left out; those with a default then take it."]
    return lines


def asked_again(params: Mapping[str, JSONValue], server: str | None, problem: str) -> str:
    """The question once more after an answer that did not fit, what was wrong last, where it is read first."""
    fields_asked = fields(_schema(params)) if params.get("mode") != "url" else []
    again = " Send every line again, the right ones too." if len(fields_asked) > 1 else ""
    return f"{question_for(params, server)}\n\n**Not taken:** {problem}{again}"


def read_answer(text: str, schema: Mapping[str, JSONValue]) -> Answer:
    """The person's reply to a form question as what the server is sent back."""
    if len(text) > _LONGEST_ANSWER:
        return Invalid(f"That answer is too long ({len(text)} characters); the form needs only short values.")
    asked = fields(schema)
    words = _words(text)
    if not _is_a_value(words, asked):
        if words in _CANCEL:
            return Cancelled()
        if words in _DECLINE:
            return Declined()
    if not asked:
        return Accepted({}) if words in _DONE else Invalid("Reply **yes** to go on. " + HOW_TO_REFUSE)
    given = _given(text, asked)
    if isinstance(given, Invalid):
        return given
    return _content(asked, given)


def read_url_answer(text: str) -> Answer:
    """The person's reply to a URL question: done, declined, cancelled, or not an answer."""
    words = _words(text)
    if words in _DONE:
        return Accepted({})
    if words in _CANCEL:
        return Cancelled()
    if words in _DECLINE:
        return Declined()
    return Invalid("Reply **done** when you have finished at the link, **decline** to refuse, or **cancel** to stop.")


def _words(text: str) -> str:
    return " ".join(text.strip().strip(".!").lower().replace("’", "'").split())


def _is_a_value(words: str, asked: list[Field]) -> bool:
    """Whether a bare decline or cancel word is the answer itself, for a one-field form that takes it."""
    if len(asked) != 1 or asked[0].kind not in ("boolean", "choice"):
        return False
    try:
        convert(asked[0], words)
    except Problem:
        return False
    return True


def _given(text: str, asked: list[Field]) -> dict[str, str] | Invalid:
    """The raw words for each field the person named (or the whole reply, for a one-field form)."""
    stripped = text.strip()
    if stripped.startswith("{"):
        return _from_json(stripped, asked)
    if len(asked) == 1:
        match = _KEY_LINE.fullmatch(stripped)
        if match and _field(match.group(1), asked) is not None:
            return {asked[0].name: match.group(2)}
        return {asked[0].name: stripped} if stripped else {}
    given: dict[str, str] = {}
    for line in filter(str.strip, stripped.splitlines()):
        match = _KEY_LINE.fullmatch(line)
        field = _field(match.group(1), asked) if match else None
        if match is None or field is None:
            return Invalid(f"I could not tell which field `{line.strip()[:80]}` is for. {_fields_are(asked)}")
        given[field.name] = match.group(2)
    return given


def _from_json(text: str, asked: list[Field]) -> dict[str, str] | Invalid:
    try:
        parsed = json.loads(text)
    except ValueError:
        return Invalid("That looks like JSON but is not valid JSON. Reply with one `name: value` per line instead.")
    if not isinstance(parsed, dict):
        return Invalid("A JSON answer must be an object of `\"name\": value`.")
    given: dict[str, str] = {}
    for key, value in parsed.items():
        field = _field(str(key), asked)
        if field is None:
            return Invalid(f"The form has no field `{str(key)[:80]}`. {_fields_are(asked)}")
        if value is not None:
            given[field.name] = value if isinstance(value, str) else shown(field, value)
    return given


def _field(key: str, asked: list[Field]) -> Field | None:
    """The field a key names: its name or title, in any case, with spaces, dashes and underscores alike."""
    wanted = _folded(key)
    return next((field for field in asked if wanted in (_folded(field.name), _folded(field.label))), None)


def _folded(name: str) -> str:
    return re.sub(r"[\s_-]+", " ", name).strip().casefold()


def _fields_are(asked: list[Field]) -> str:
    return "The fields are: " + ", ".join(f"`{field.name}`" for field in asked) + "."


def _content(asked: list[Field], given: Mapping[str, str]) -> Answer:
    """The values the server is sent: each given one converted and checked, defaults for the rest."""
    content: dict[str, Value] = {}
    problems: list[str] = []
    for field in asked:
        raw = given.get(field.name)
        if raw is None or not raw.strip():
            if field.default is not None:
                content[field.name] = field.default
            elif field.required:
                problems.append(f"{field.label} is needed.")
            continue
        try:
            content[field.name] = convert(field, raw)
        except Problem as problem:
            problems.append(str(problem))
    return Invalid(" ".join(problems)) if problems else Accepted(content)
