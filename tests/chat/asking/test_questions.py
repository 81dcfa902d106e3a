"""A server's question to the person (app/chat/questions.py): the words that ask it, and replies read as the
answer the server expects, for every field shape MCP's `requestedSchema` allows. Pure: no process, no socket."""

from datetime import date
from typing import Any, Literal

import pytest
from mcp.server.elicitation import render_elicitation_schema
from mcp.types import ElicitRequestFormParams, ElicitRequestURLParams, ElicitResult
from pydantic import BaseModel, Field

from app.chat.asking.questions import (
    Accepted,
    Answer,
    Cancelled,
    Declined,
    Invalid,
    answer_for,
    form_question,
    question_for,
    read_answer,
    read_url_answer,
    url_question,
)
from tests.support.mcp_servers.asks import Booking


def form(required: tuple[str, ...] = (), **properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required)}


AGE = form(("age",), age={"type": "integer", "title": "Age", "minimum": 0, "maximum": 150})
PRICE = form(("price",), price={"type": "number", "minimum": 0.5})
CONFIRM = form(("confirm",), confirm={"type": "boolean", "title": "Confirm"})
NAME = form(("name",), name={"type": "string", "minLength": 2, "maxLength": 5})
EMAIL = form(("email",), email={"type": "string", "format": "email"})
SITE = form(("site",), site={"type": "string", "format": "uri"})
DAY = form(("day",), day={"type": "string", "format": "date"})
WHEN = form(("when",), when={"type": "string", "format": "date-time"})
COLOR = form(("color",), color={"type": "string", "enum": ["red", "green"]})
SIZE = form(("size",), size={"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l",
                                                                                          "title": "Large"}]})
LEGACY = form(("tier",), tier={"type": "string", "enum": ["p", "f"], "enumNames": ["Paid", "Free"]})
ANSWER = form(("answer",), answer={"type": "string", "enum": ["yes", "no", "maybe"]})
TAGS = form(tags={"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "maxItems": 2})
DIET = form(("diet",), diet={"type": "array", "minItems": 1, "items": {"anyOf": [
    {"const": "veg", "title": "Vegetarian"}, {"const": "gf", "title": "Gluten free"}]}})
NOTE = form(note={"type": "string", "default": "none"})
EMPTY = form()
TABLE = form(("party_size", "time"), party_size={"type": "integer", "title": "Party size", "minimum": 1, "maximum": 20},
             time={"type": "string", "title": "Time"}, seating={"type": "string", "enum": ["inside", "outside"],
                                                                  "default": "inside"},
             notes={"type": "string"}, high_chair={"type": "boolean", "title": "High chair"})

ROWS: list[tuple[str, dict[str, Any], str, Answer]] = [
    # one field: the reply is the value
    ("integer", AGE, "42", Accepted({"age": 42})),
    ("integer, signed and spaced", AGE, " +7 ", Accepted({"age": 7})),
    ("integer written as 3.0", AGE, "3.0", Accepted({"age": 3})),
    ("integer, name: value", AGE, "age: 9", Accepted({"age": 9})),
    ("integer, title any case", AGE, "AGE = 9", Accepted({"age": 9})),
    ("integer, not a number", AGE, "forty", Invalid("Age must be a whole number.")),
    ("integer, a fraction", AGE, "4.5", Invalid("Age must be a whole number.")),
    ("integer above maximum", AGE, "151", Invalid("Age must be from 0 to 150.")),
    ("integer below minimum", AGE, "-1", Invalid("Age must be from 0 to 150.")),
    ("integer, nothing given", AGE, "   ", Invalid("Age is needed.")),
    ("number", PRICE, "2.25", Accepted({"price": 2.25})),
    ("number given whole", PRICE, "3", Accepted({"price": 3})),
    ("number below minimum", PRICE, "0.1", Invalid("price must be at least 0.5.")),
    ("number, not finite", PRICE, "inf", Invalid("price must be a number.")),
    ("number, nan", PRICE, "nan", Invalid("price must be a number.")),
    ("boolean yes", CONFIRM, "yes", Accepted({"confirm": True})),
    ("boolean true", CONFIRM, "True", Accepted({"confirm": True})),
    ("boolean y.", CONFIRM, "y.", Accepted({"confirm": True})),
    ("boolean no is an answer", CONFIRM, "no", Accepted({"confirm": False})),
    ("boolean false", CONFIRM, "false", Accepted({"confirm": False})),
    ("boolean, decline still declines", CONFIRM, "decline", Declined()),
    ("boolean, cancel still cancels", CONFIRM, "Cancel", Cancelled()),
    ("boolean, neither", CONFIRM, "perhaps", Invalid("Confirm must be yes or no.")),
    ("string", NAME, "Ada", Accepted({"name": "Ada"})),
    ("string too short", NAME, "A", Invalid("name must be from 2 to 5 characters long.")),
    ("string too long", NAME, "Adelaide", Invalid("name must be from 2 to 5 characters long.")),
    ("string: a decline word declines", NAME, "skip", Declined()),
    ("string: a phrase with no in it is text", NAME, "no go", Accepted({"name": "no go"})),
    ("email", EMAIL, "ada@example.org", Accepted({"email": "ada@example.org"})),
    ("email without a domain", EMAIL, "ada@", Invalid("email must be an email address.")),
    ("uri", SITE, "https://example.org/x", Accepted({"site": "https://example.org/x"})),
    ("uri without a scheme", SITE, "example org", Invalid("site must be a web address (URL).")),
    ("date", DAY, "2026-11-25", Accepted({"day": "2026-11-25"})),
    ("date, impossible", DAY, "2026-02-30", Invalid("day must be a date (YYYY-MM-DD).")),
    ("date-time", WHEN, "2026-11-25T19:30:00Z", Accepted({"when": "2026-11-25T19:30:00Z"})),
    ("date-time, only a date", WHEN, "2026-11-25", Invalid("when must be a date and time (YYYY-MM-DDTHH:MM).")),
    ("enum by value, any case", COLOR, "RED", Accepted({"color": "red"})),
    ("enum, quoted", COLOR, "`green`", Accepted({"color": "green"})),
    ("enum, not allowed", COLOR, "blue", Invalid("color must be one of: red, green.")),
    ("oneOf by title", SIZE, "large", Accepted({"size": "l"})),
    ("oneOf by const", SIZE, "s", Accepted({"size": "s"})),
    ("oneOf, not allowed", SIZE, "medium", Invalid("size must be one of: Small, Large.")),
    ("legacy enumNames by name", LEGACY, "free", Accepted({"tier": "f"})),
    ("legacy enumNames by value", LEGACY, "p", Accepted({"tier": "p"})),
    ("an option named no is an answer", ANSWER, "no", Accepted({"answer": "no"})),
    ("array of enums, comma list", TAGS, "a, C", Accepted({"tags": ["a", "c"]})),
    ("array of enums, repeated once", TAGS, "a,a", Accepted({"tags": ["a"]})),
    ("array of enums, too many", TAGS, "a, b, c", Invalid("tags takes at most 2 choices.")),
    ("array of enums, unknown", TAGS, "a, z", Invalid("tags must be one of: a, b, c.")),
    ("array of enums, optional and empty", TAGS, "tags:", Accepted({})),
    ("array of titled enums", DIET, "Vegetarian; gluten FREE", Accepted({"diet": ["veg", "gf"]})),
    ("array of titled enums, at least one", DIET, "diet: ", Invalid("diet is needed.")),
    ("default filled", NOTE, "note:", Accepted({"note": "none"})),
    ("no fields: yes goes on", EMPTY, "ok", Accepted({})),
    ("no fields: no declines", EMPTY, "no", Declined()),
    ("no fields: anything else", EMPTY, "what?", Invalid("Reply **yes** to go on. Or reply **decline** to refuse, "
                                                         "or **cancel** to stop.")),
    # several fields: name: value lines or JSON
    ("lines", TABLE, "party_size: 4\ntime: 19:30", Accepted({"party_size": 4, "time": "19:30", "seating": "inside"})),
    ("lines by title, any case, bullets", TABLE,
     "- **Party Size**: 2\n* TIME = 8pm\n\nhigh-chair: yes\nseating: OUTSIDE",
     Accepted({"party_size": 2, "time": "8pm", "seating": "outside", "high_chair": True})),
    ("lines, a value with colons and equals", TABLE, "party_size: 2\ntime: 19:30\nnotes: a=b: c",
     Accepted({"party_size": 2, "time": "19:30", "seating": "inside", "notes": "a=b: c"})),
    ("JSON", TABLE, '{"party_size": 3, "Time": "noon", "high_chair": false, "notes": null}',
     Accepted({"party_size": 3, "time": "noon", "seating": "inside", "high_chair": False})),
    ("JSON, number as text", TABLE, '{"party_size": "5", "time": "noon"}',
     Accepted({"party_size": 5, "time": "noon", "seating": "inside"})),
    ("JSON, broken", TABLE, '{"party_size": 3', Invalid(
        "That looks like JSON but is not valid JSON. Reply with one `name: value` per line instead.")),
    ("JSON, not an object", TABLE, "[1]", Invalid("I could not tell which field `[1]` is for. The fields are: "
                                                  "`party_size`, `time`, `seating`, `notes`, `high_chair`.")),
    ("JSON, a list for an array of enums", TAGS, '{"tags": ["b", "A"]}', Accepted({"tags": ["b", "a"]})),
    ("JSON, a whole number written 1.0", TABLE, '{"party_size": 1.0, "time": "9"}',
     Accepted({"party_size": 1, "time": "9", "seating": "inside"})),
    ("JSON, unknown field", TABLE, '{"party": 3}', Invalid(
        "The form has no field `party`. The fields are: `party_size`, `time`, `seating`, `notes`, `high_chair`.")),
    ("lines, unknown field", TABLE, "party_size: 2\nwhen: 9", Invalid(
        "I could not tell which field `when: 9` is for. The fields are: `party_size`, `time`, `seating`, `notes`, "
        "`high_chair`.")),
    ("lines, every problem at once", TABLE, "party_size: 0\nhigh chair: maybe",
     Invalid("Party size must be from 1 to 20. Time is needed. High chair must be yes or no.")),
    ("the example's placeholder pasted as it was", TABLE, "party_size: 2\ntime: …",
     Invalid("Time needs a value of yours in place of the example's `…`.")),
    ("several fields: no declines", TABLE, "No.", Declined()),
    ("several fields: never mind cancels", TABLE, "Never  mind", Cancelled()),
    ("several fields: stop cancels", TABLE, "stop!", Cancelled()),
    ("several fields: a bare value is not an answer", TABLE, "4", Invalid(
        "I could not tell which field `4` is for. The fields are: `party_size`, `time`, `seating`, `notes`, "
        "`high_chair`.")),
]


@pytest.mark.parametrize(("schema", "reply", "expected"), [row[1:] for row in ROWS], ids=[row[0] for row in ROWS])
def test_a_reply_is_read_as_the_answer_the_server_expects(schema: dict[str, Any], reply: str, expected: Answer) -> None:
    assert read_answer(reply, schema) == expected


def test_limits_and_defaults_that_are_not_what_the_schema_allows_are_not_applied() -> None:
    # A server's own mistakes (a limit as text, a default as an object) once raised a TypeError mid-answer.
    schema = {"type": "object", "required": ["count", "name"], "properties": {
        "count": {"type": "integer", "minimum": "5", "maximum": True},
        "name": {"type": "string", "maxLength": "3", "default": {"not": "a value"}},
    }}
    assert read_answer("count: 2\nname: Alexandra", schema) == Accepted({"count": 2, "name": "Alexandra"})
    assert read_answer("count: 2", schema) == Invalid("name is needed.")


def test_a_huge_reply_is_not_an_answer() -> None:
    answer = read_answer("x" * 10_001, NAME)
    assert isinstance(answer, Invalid) and "too long" in answer.problem


@pytest.mark.parametrize(("reply", "expected"), [
    ("done", Accepted({})), ("Done.", Accepted({})), ("ok", Accepted({})), ("signed in", Accepted({})),
    ("decline", Declined()), ("no", Declined()), ("cancel", Cancelled()), ("stop", Cancelled()),
])
def test_a_url_question_goes_on_with_done(reply: str, expected: Answer) -> None:
    assert read_url_answer(reply) == expected


def test_a_url_question_says_how_to_answer_when_the_reply_is_something_else() -> None:
    answer = read_url_answer("what is this?")
    assert isinstance(answer, Invalid) and "**done**" in answer.problem


def test_the_form_question_lists_every_field_with_what_it_takes() -> None:
    text = form_question("Booking a table at Luigi.\nFor how many?", TABLE, "asks")
    assert text.startswith("The server **asks** asks you:\n\n> Booking a table at Luigi.\n> For how many?\n")
    assert "- **Party size** (`party_size`): a whole number from 1 to 20; required" in text
    assert "- **Time** (`time`): text; required" in text
    assert "- **seating**: one of `inside`, `outside`; optional (default: inside)" in text
    assert "- **High chair** (`high_chair`): yes or no; optional" in text
    # The example: what is needed or has a default, never an optional yes the person did not give.
    assert "```text\nparty_size: 1\ntime: …\nseating: inside\n```" in text
    assert "Optional fields may be left out" in text
    assert text.endswith("Or reply **decline** to refuse, or **cancel** to stop.")


@pytest.mark.parametrize(("schema", "shows"), [
    (AGE, "Reply with the value, for example: `0`."),
    (CONFIRM, "Reply **yes** or **no**."),
    (SIZE, "- **size**: one of Small (`s`), Large (`l`); required"),
    (LEGACY, "one of Paid (`p`), Free (`f`)"),
    (DIET, "any of Vegetarian (`veg`), Gluten free (`gf`), separated by commas (at least 1 choices); required"),
    (TAGS, "any of `a`, `b`, `c`, separated by commas (at most 2 choices); optional"),
    (NAME, "text, from 2 to 5 characters; required"),
    (EMAIL, "an email address; required"),
    (WHEN, "a date and time (YYYY-MM-DDTHH:MM)"),
    (PRICE, "a number at least 0.5"),
    (form(x={"type": "string", "description": "Why\n  it matters" + "!" * 400}), ". Why it matters!!!"),
])
def test_each_field_shape_is_described(schema: dict[str, Any], shows: str) -> None:
    assert shows in form_question("Question?", schema, None)


def test_a_long_description_is_cut_and_a_long_message_too() -> None:
    text = form_question("m" * 5000, form(x={"type": "string", "description": "d" * 1000}), None)
    assert text.startswith("A tool's server asks you:") and "m" * 2001 not in text
    assert "d" * 300 + "…" in text and "d" * 301 not in text


def test_the_url_question_shows_the_link_and_how_to_go_on() -> None:
    text = url_question("Sign in to calendar.", "https://example.test/sign-in?service=calendar", "asks")
    assert "> Sign in to calendar." in text and "<https://example.test/sign-in?service=calendar>" in text
    assert "Reply **done** when you have finished there." in text


class Everything(BaseModel):
    """A form as an MCPServer renders it from a model: the shapes a real server sends."""

    count: int = Field(ge=1, le=9)
    ratio: float = 0.5
    agree: bool
    color: Literal["red", "green"] = "red"
    tags: list[Literal["a", "b"]] = Field(default_factory=list)
    day: date | None = None
    name: str = Field(min_length=1, title="Your name")


def test_the_answer_to_a_form_an_sdk_server_renders_validates_against_its_model() -> None:
    schema = render_elicitation_schema(Everything)
    reply = "count: 3\nagree: yes\ncolor: Green\ntags: a, b\nday: 2026-11-25\nyour name: Ada"
    answer = read_answer(reply, schema)
    assert isinstance(answer, Accepted)
    sent = ElicitResult(action="accept", content=answer.content)  # what the client would send back
    assert sent.content is not None
    parsed = Everything.model_validate(sent.content)
    assert parsed == Everything(count=3, ratio=0.5, agree=True, color="green", tags=["a", "b"], day=date(2026, 11, 25),
                                name="Ada")


def test_the_booking_question_of_the_asks_test_server_reads_its_answer() -> None:
    schema = render_elicitation_schema(Booking)
    answer = read_answer("Party size: 4\ntime: 19:30", schema)
    assert isinstance(answer, Accepted)
    assert Booking.model_validate(answer.content) == Booking(party_size=4, time="19:30")
    assert read_answer("party_size: 40\ntime: 19:30", schema) == Invalid("Party size must be from 1 to 20.")


# server-everything's trigger-elicitation-request form (its dist/tools/trigger-elicitation-request.js), shortened.
EVERYTHING_FORM: dict[str, Any] = {"type": "object", "required": ["name"], "properties": {
    "name": {"title": "String", "type": "string", "description": "Your full, legal name"},
    "check": {"title": "Boolean", "type": "boolean", "description": "Agree to the terms and conditions"},
    "firstLine": {"title": "String with default", "type": "string", "default": "It was a dark and stormy night."},
    "email": {"title": "String with email format", "type": "string", "format": "email"},
    "homepage": {"type": "string", "format": "uri", "title": "String with uri format"},
    "birthdate": {"title": "String with date format", "type": "string", "format": "date"},
    "integer": {"title": "Integer", "type": "integer", "minimum": 1, "maximum": 100, "default": 42},
    "number": {"title": "Number in range 1-1000", "type": "number", "minimum": 0, "maximum": 1000, "default": 3.14},
    "untitledSingleSelectEnum": {"type": "string", "title": "Untitled Single Select Enum",
                                 "enum": ["Monica", "Rachel", "Joey"], "default": "Monica"},
    "untitledMultipleSelectEnum": {"type": "array", "title": "Untitled Multiple Select Enum", "minItems": 1,
                                   "maxItems": 3, "items": {"type": "string", "enum": ["Guitar", "Piano", "Drums"]},
                                   "default": ["Guitar"]},
    "titledSingleSelectEnum": {"type": "string", "title": "Titled Single Select Enum", "default": "hero-1",
                               "oneOf": [{"const": "hero-1", "title": "Superman"},
                                         {"const": "hero-2", "title": "Wonder Woman"}]},
    "titledMultipleSelectEnum": {"type": "array", "title": "Titled Multiple Select Enum", "minItems": 1,
                                 "maxItems": 3, "default": ["fish-1"], "items": {"anyOf": [
                                     {"const": "fish-1", "title": "Tuna"}, {"const": "fish-2", "title": "Salmon"}]}},
    "legacyTitledEnum": {"type": "string", "title": "Legacy Titled Single Select Enum", "default": "pet-1",
                         "enum": ["pet-1", "pet-2"], "enumNames": ["Cats", "Dogs"]},
}}
EVERYTHING_DEFAULTS = {"firstLine": "It was a dark and stormy night.", "integer": 42, "number": 3.14,
                       "untitledSingleSelectEnum": "Monica", "untitledMultipleSelectEnum": ["Guitar"],
                       "titledSingleSelectEnum": "hero-1", "titledMultipleSelectEnum": ["fish-1"],
                       "legacyTitledEnum": "pet-1"}


def test_server_everythings_form_is_asked_field_by_field() -> None:
    text = form_question("Please provide inputs for the following fields:", EVERYTHING_FORM, "everything")
    assert text.count("\n- **") == len(EVERYTHING_FORM["properties"])
    assert "- **String** (`name`): text; required. Your full, legal name" in text
    assert "- **Legacy Titled Single Select Enum** (`legacyTitledEnum`): one of Cats (`pet-1`), Dogs (`pet-2`); " \
           "optional (default: Cats)" in text  # a choice is shown by its label, which is also read back
    assert "(default: Tuna)\n" in text and "titledMultipleSelectEnum: Tuna\n" in text
    assert "(`firstLine`): text; optional (default: It was a dark and stormy night.)" in text
    assert "\ncheck:" not in text and "\nemail:" not in text  # optional, no default: not in the example
    assert "any of Tuna (`fish-1`), Salmon (`fish-2`), separated by commas (from 1 to 3 choices); optional" in text


def test_server_everythings_form_takes_just_the_name_and_the_defaults() -> None:
    assert read_answer("String: Ada Lovelace", EVERYTHING_FORM) == Accepted({"name": "Ada Lovelace",
                                                                             **EVERYTHING_DEFAULTS})


def test_server_everythings_form_takes_every_spelling_at_once() -> None:
    reply = "\n".join([
        "name: Ada", "Boolean: yes", "email: ada@example.org", "homepage: https://ada.example", "birthdate: 1815-12-10",
        "integer: 7", "Number in range 1-1000: 2.5", "untitled single select enum: joey",
        "untitledMultipleSelectEnum: piano, drums", "Titled Single Select Enum: wonder woman",
        "titledMultipleSelectEnum: Salmon, Tuna", "legacyTitledEnum: dogs"])
    assert read_answer(reply, EVERYTHING_FORM) == Accepted({
        "name": "Ada", "check": True, "firstLine": "It was a dark and stormy night.", "email": "ada@example.org",
        "homepage": "https://ada.example", "birthdate": "1815-12-10", "integer": 7, "number": 2.5,
        "untitledSingleSelectEnum": "Joey", "untitledMultipleSelectEnum": ["Piano", "Drums"],
        "titledSingleSelectEnum": "hero-2", "titledMultipleSelectEnum": ["fish-2", "fish-1"],
        "legacyTitledEnum": "pet-2"})


def test_a_server_cannot_put_an_image_or_a_broken_link_into_the_question() -> None:
    text = url_question("Look ![x](https://tracker.example/p.png)", "javascript:alert(1)> <b>", "asks")
    assert "![x]" not in text and "!\\[x](https://tracker.example/p.png)" in text
    assert "Open this link: `javascript:alert(1)> <b>`" in text
    assert "![" not in form_question("![x](https://tracker.example/p.png)", NAME, None)


def test_a_request_kept_as_json_is_asked_and_answered_by_its_mode() -> None:
    form_params = ElicitRequestFormParams(message="How old?", requested_schema=AGE)
    url_params = ElicitRequestURLParams(message="Sign in.", url="https://example.test/in", elicitation_id="e1")
    as_form, as_url = (p.model_dump(by_alias=True, mode="json", exclude_none=True) for p in (form_params, url_params))
    assert question_for(as_form, "s") == form_question("How old?", AGE, "s")
    assert answer_for("42", as_form) == Accepted({"age": 42})
    assert question_for(as_url, "s") == url_question("Sign in.", "https://example.test/in", "s")
    assert answer_for("done", as_url) == Accepted({}) and answer_for("42", as_url) == read_url_answer("42")
