"""Issue 30's server questions in Open WebUI itself (opt-in, see tests/support/open_webui.py): a 2026-era server's
tool answers with `input_required`; the gateway ends the answer with the server's question, Open WebUI shows it,
and the person's next message answers it.

Open WebUI -> the gateway (keys set, the default trace) -> tests/support/mcp_servers/asks.py over stdio
(`book_table` asks a form: party_size 1-20 and time; `sign_in` asks the person to open a link) and a scripted
upstream. Only the server can say "booked Luigi for 4 at 19:30", so seeing it shows the answer reached the server.
Screenshots: test-artifacts/open_webui_question_{asked,booked,wrong,rebooked,link,signed_in}.png.
"""

import json
from collections.abc import Iterator
from typing import Any

import pytest

from app.openai.schemas import content_text
from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn
from tests.support.open_webui import (
    ARTIFACTS,
    chat_page,
    offered_name,
    running_open_webui,
    skip_without_open_webui,
    tool_result,
)
from tests.support.servers import ServerThread

KEY = "sk-owui-key"
WAIT = 60_000  # ms: Open WebUI and the model on two busy cores
# What the person asks; the scripted model calls the asks server's tool with the last word.
ASKS = {"Book a table at": ("book_table", "restaurant"), "Sign in to": ("sign_in", "service")}
skip_without_open_webui()



def scripted(body: dict[str, Any]) -> Turn:
    """The model: one tool per request of the person's, then an answer quoting what the tool said."""
    messages = body["messages"]
    last = max(i for i, m in enumerate(messages) if m["role"] == "user")
    asked = content_text(messages[last].get("content"))
    if asked.lstrip().startswith("### Task:"):  # Open WebUI's titles, tags and follow-ups
        return Turn(content="{}")
    results = [tool_result(m.get("content")) for m in messages[last:] if m["role"] == "tool"]
    if results:
        return Turn(content=f"Done: the server said {results[-1]}.")
    verb, _, word = asked.rpartition(" ")
    tool, argument = ASKS.get(verb, ("", ""))
    name = offered_name(body, tool) if tool else None
    if name is None:
        return Turn(content="I cannot do that.")
    return Turn(content="On it.", calls=[Call(name, {argument: word})])


@pytest.fixture(scope="module")
def model() -> FakeUpstream:
    return FakeUpstream(default=scripted)


@pytest.fixture(scope="module")
def gateway(model: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with ServerThread(model.app) as upstream, running_gateway(
        tmp_path_factory.mktemp("owui-gateway"), {"asks": stdio_entry("asks.py")}, ready=("asks",),
        key=KEY, upstream_url=f"{upstream.url}/v1", api_keys=KEY,
    ) as gateway:
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


def _shot(tab: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / f"open_webui_question_{name}.png"), full_page=True)


def _ask_to_book(tab: Any, model: FakeUpstream) -> str:
    """"Book a table at Luigi": the server's form question is shown, after one request to the model; the tool."""
    from playwright.sync_api import expect

    [asked] = _say(tab, model, "Book a table at Luigi", "for how many people, and when?")
    tool = offered_name(asked, "book_table")
    assert tool is not None and content_text(asked["messages"][-1]["content"]) == "Book a table at Luigi"
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
