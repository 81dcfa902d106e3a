"""Issue 30's server questions in Open WebUI itself (opt-in, see tests/support/open_webui.py): a 2026-era server's
tool answers with `input_required`, a 2025-era one asks with `elicitation/create` in the middle of the call (which
waits in the server, app/mcp/held_calls.py); either way the gateway ends the answer with the server's question,
Open WebUI shows it, and the person's next message answers it.

Open WebUI -> the gateway (keys set, the default trace) -> tests/support/mcp_servers/asks.py over stdio twice
(`asks`, 2026-era; `asks25`, the same server on a `"mode": "legacy"` connection: `book_table` asks a form,
party_size 1-20 and time; `sign_in` asks the person to open a link), server-everything from npm
(`trigger-elicitation-request`: a 13-field form of every kind of field, asked mid-call) and a scripted upstream.
Only the server can say "booked Luigi for 4 at 19:30" or "Name: Ada Lovelace", so seeing it shows the answer
reached the server.
Screenshots: test-artifacts/open_webui_question_{asked,booked,wrong,rebooked,link,signed_in}.png (2026-era),
open_webui_question_{held_asked,held_booked,form_asked,form_wrong,form_wrong_whole,form_answered}.png
(2025-era).
"""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.openai.schemas import content_text
from tests.conftest import Gateway, stdio_entry
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn
from tests.support.open_webui import (
    ARTIFACTS,
    chat_page,
    keyed_gateway,
    offered_name,
    person_asked,
    running_open_webui,
    skip_without_open_webui,
    tool_result,
)

KEY = "sk-owui-key"
WAIT = 60_000  # ms: Open WebUI and the model on two busy cores
# What the person asks; the scripted model calls that server's tool, with the last word as its one argument.
ASKS = {"Book a table at": ("asks", "book_table", "restaurant"), "Sign in to": ("asks", "sign_in", "service"),
        "Reserve a table at": ("asks25", "book_table", "restaurant"),
        "Fill in the": ("everything", "trigger-elicitation-request", "")}
EVERYTHING = Path(__file__).parent / "npm" / "node_modules" / ".bin" / "mcp-server-everything"
SERVERS = {"asks": stdio_entry("asks.py"), "asks25": stdio_entry("asks.py") | {"mode": "legacy"}}
if EVERYTHING.exists():  # `npm ci --prefix tests/npm`; its test is skipped without it
    SERVERS["everything"] = {"command": str(EVERYTHING)}
skip_without_open_webui()


def scripted(body: dict[str, Any]) -> Turn:
    """The model: one tool per request of the person's, then an answer quoting what the tool said."""
    person = person_asked(body)
    if person is None:  # Open WebUI's titles, tags and follow-ups
        return Turn(content="{}")
    asked, results = person.text, person.results
    if results:  # server-everything appends its raw result, for debugging: the model leaves it out
        said = results[-1].split("\nRaw result:")[0]
        return Turn(content=f"Done: the server said {said}" + ("" if "\n" in said else "."))
    verb, _, word = asked.rpartition(" ")
    server, tool, argument = ASKS.get(verb, ("", "", ""))
    name = offered_name(body, tool, server) if tool else None
    if name is None:
        return Turn(content="I cannot do that.")
    return Turn(content="On it.", calls=[Call(name, {argument: word} if argument else {})])


@pytest.fixture(scope="module")
def model() -> FakeUpstream:
    return FakeUpstream(default=scripted)


@pytest.fixture(scope="module")
def gateway(model: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with keyed_gateway(model, tmp_path_factory.mktemp("owui-gateway"), SERVERS, KEY) as gateway:
        yield gateway


@pytest.fixture(scope="module")
def open_webui(gateway: Gateway, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_open_webui(f"{gateway.url}/v1", KEY, MODEL, tmp_path_factory.mktemp("owui-data")) as url:
        yield url


def _model_requests(model: FakeUpstream, since: int) -> list[dict[str, Any]]:
    """The chat requests since `since` that were the person's, not Open WebUI's background tasks."""
    def task(body: dict[str, Any]) -> bool:
        users = [m for m in body["messages"] if m["role"] == "user"]
        return bool(users) and content_text(users[-1].get("content")).lstrip().startswith("### Task:")
    return [body for body in model.chat_requests()[since:] if not task(body)]


def _type_lines(tab: Any, text: str) -> None:
    """Types `text` into Open WebUI's prompt, Shift+Enter between lines (Enter alone sends), then sends."""
    tab.locator("#chat-input").click()
    for i, line in enumerate(text.split("\n")):
        if i:
            tab.keyboard.press("Shift+Enter")
        tab.keyboard.type(line)
    tab.keyboard.press("Enter")


def _say(tab: Any, model: FakeUpstream, text: str, shows: str) -> list[dict[str, Any]]:
    """Sends `text`, waits until the page shows `shows`; the model's requests for it (no background tasks)."""
    from playwright.sync_api import expect

    before = len(model.chat_requests())
    _type_lines(tab, text)
    expect(tab.get_by_text(shows).last).to_be_visible(timeout=WAIT)
    return _model_requests(model, before)


def _shot(tab: Any, name: str, height: int | None = None) -> None:
    """A screenshot of the chat; `height` (pixels) for a window tall enough for a long question, as Open WebUI's
    chat scrolls inside the page, so a full-page screenshot shows only its last screen."""
    ARTIFACTS.mkdir(exist_ok=True)
    if height:
        tab.set_viewport_size({"width": 1280, "height": height})
    tab.screenshot(path=str(ARTIFACTS / f"open_webui_question_{name}.png"), full_page=True)
    if height:
        tab.set_viewport_size({"width": 1280, "height": 1000})


def _ask_to_book(tab: Any, model: FakeUpstream, request: str = "Book a table at Luigi", server: str = "asks") -> str:
    """"Book a table at Luigi": `server`'s form question is shown, after one request to the model; the tool."""
    from playwright.sync_api import expect

    [asked] = _say(tab, model, request, "for how many people, and when?")
    tool = offered_name(asked, "book_table", server)
    assert tool is not None and content_text(asked["messages"][-1]["content"]) == request
    expect(tab.locator("p", has_text=f"The server {server} asks you:").last).to_be_visible()
    expect(tab.locator("blockquote", has_text="Booking a table at Luigi: for how many people").last).to_be_visible()
    for field in ("Party size", "Time"):
        expect(tab.locator("li strong", has_text=field).last).to_be_visible()
    expect(tab.get_by_text("a whole number from 1 to 20").last).to_be_visible()
    # The example, in a code block: Open WebUI shows it in an editor (CodeMirror), with Copy and Save buttons.
    example = tab.locator(".cm-content", has_text="party_size: 1").last
    expect(example).to_be_visible()
    assert example.inner_text() == "party_size: 1\ntime: …"
    return tool


def _only_the_call_and_itstool_result(body: dict[str, Any], tool: str, asked: str, result: str, *hidden: str) -> None:
    """The model saw the person's request, the call and the server's result, never the question or the answers."""
    seen = [m for m in body["messages"] if m["role"] != "system"]
    assert seen[-3]["role"] == "user" and content_text(seen[-3]["content"]) == asked
    assert seen[-2]["role"] == "assistant" and seen[-2]["tool_calls"][0]["function"]["name"] == tool
    assert seen[-1]["role"] == "tool" and tool_result(seen[-1]["content"]) == result
    text = json.dumps(seen)
    for words in ("for how many people", "party_size:", "asks you", *hidden):
        assert words not in text, words


def test_the_form_question_is_shown_and_the_answer_books_the_table(open_webui: str, model: FakeUpstream) -> None:
    with chat_page(open_webui, "open_webui_question_booked.png") as tab:
        tool = _ask_to_book(tab, model)
        _shot(tab, "asked")
        [after] = _say(tab, model, "party_size: 4\ntime: 19:30", "Done: the server said booked Luigi for 4 at 19:30")
        _only_the_call_and_itstool_result(after, tool, "Book a table at Luigi", "booked Luigi for 4 at 19:30")


def test_a_wrong_value_is_asked_about_again_then_a_right_one_books(open_webui: str, model: FakeUpstream) -> None:
    from playwright.sync_api import expect

    with chat_page(open_webui, "open_webui_question_rebooked.png") as tab:
        tool = _ask_to_book(tab, model)
        assert _say(tab, model, "party_size: 50\ntime: 20:00", "Party size must be from 1 to 20.") == []
        expect(tab.locator("blockquote", has_text="for how many people").last).to_be_visible()  # asked again
        _shot(tab, "wrong")
        [after] = _say(tab, model, "party_size: 6\ntime: 20:00", "Done: the server said booked Luigi for 6 at 20:00")
        _only_the_call_and_itstool_result(after, tool, "Book a table at Luigi", "booked Luigi for 6 at 20:00",
                                      "must be")
        expect(tab.get_by_text("booked Luigi for 50")).to_have_count(0)


def test_the_link_question_shows_the_link_and_done_signs_in(open_webui: str, model: FakeUpstream) -> None:
    from playwright.sync_api import expect

    with chat_page(open_webui, "open_webui_question_signed_in.png") as tab:
        [asked] = _say(tab, model, "Sign in to calendar", "Sign in to calendar to continue.")
        tool = offered_name(asked, "sign_in")
        assert tool is not None
        link = tab.locator('a[href="https://example.test/sign-in?service=calendar"]').last
        expect(link).to_be_visible()
        _shot(tab, "link")
        [after] = _say(tab, model, "done", "Done: the server said signed in to calendar")
        _only_the_call_and_itstool_result(after, tool, "Sign in to calendar", "signed in to calendar", "example.test")


# -- a 2025-era server: the question comes in the middle of the call, which waits in the server for the answer --


def test_a_question_asked_mid_call_is_shown_and_the_answer_books_the_table(
    open_webui: str, model: FakeUpstream
) -> None:
    with chat_page(open_webui, "open_webui_question_held_booked.png") as tab:
        tool = _ask_to_book(tab, model, "Reserve a table at Luigi", "asks25")
        _shot(tab, "held_asked")
        [after] = _say(tab, model, "party_size: 4\ntime: 19:30", "Done: the server said booked Luigi for 4 at 19:30")
        _only_the_call_and_itstool_result(after, tool, "Reserve a table at Luigi", "booked Luigi for 4 at 19:30")


@pytest.mark.skipif(not EVERYTHING.exists(), reason="server-everything not installed: npm ci --prefix tests/npm")
def test_everythings_big_form_is_shown_and_answered_in_the_next_message(open_webui: str, model: FakeUpstream) -> None:
    from playwright.sync_api import expect

    with chat_page(open_webui, "open_webui_question_form_answered.png") as tab:
        [asked] = _say(tab, model, "Fill in the form", "Please provide inputs for the following fields:")
        tool = offered_name(asked, "trigger-elicitation-request", "everything")
        assert tool is not None
        expect(tab.locator("p", has_text="The server everything asks you:").last).to_be_visible()
        for label in ("String", "Boolean", "String with email format", "String with date format", "Integer",
                      "Number in range 1-1000", "Untitled Multiple Select Enum", "Titled Single Select Enum",
                      "Titled Multiple Select Enum", "Legacy Titled Single Select Enum"):
            expect(tab.locator("li strong", has_text=label).first).to_be_visible()
        expect(tab.get_by_text("a whole number from 1 to 100; optional. Your favorite integer").last).to_be_visible()
        expect(tab.get_by_text("(default: 42)").last).to_be_visible()
        expect(tab.get_by_text("Wonder Woman (hero-3)").last).to_be_visible()
        expect(tab.locator(".cm-content", has_text="name: …").last).to_be_visible()
        _shot(tab, "form_asked", height=1400)
        # A value past a bound is asked about again; the model is not asked, the call goes on waiting.
        assert _say(tab, model, "name: Ada Lovelace\ninteger: 500", "Integer must be from 1 to 100.") == []
        expect(tab.locator("blockquote", has_text="Please provide inputs").last).to_be_visible()
        _shot(tab, "form_wrong")  # what the person sees: the chat scrolled to the end
        _shot(tab, "form_wrong_whole", height=2700)
        answer = "name: Ada Lovelace\ncheck: yes\ninteger: 7\nTitled Single Select Enum: Wonder Woman"
        [after] = _say(tab, model, answer, "User provided the requested information")
        for line in ("Name: Ada Lovelace", "Agreed to terms: true", "Favorite Integer: 7"):  # the server's list
            expect(tab.locator("li", has_text=line).last).to_be_visible()
        seen = [m for m in after["messages"] if m["role"] != "system"]
        assert [m["role"] for m in seen[-3:]] == ["user", "assistant", "tool"]
        assert content_text(seen[-3]["content"]) == "Fill in the form"
        result = tool_result(seen[-1]["content"])
        assert "Agreed to terms: true" in result and '"titledSingleSelectEnum": "hero-3"' in result
        assert "Please provide inputs" not in json.dumps(seen) and "integer: 500" not in json.dumps(seen)
