"""Issue 30's approvals in Open WebUI itself (opt-in, see tests/support/open_webui.py): a tool that asks first
ends the answer with a question Open WebUI shows; the person's next message, "yes" or "no", decides.

Open WebUI -> the gateway (keys set, the default trace, the default TOOLBRIDGE_CONFIRM) -> the notes server
(tests/support/mcp_servers/files.py over stdio: `delete_note` is annotated destructive, so it asks) and a scripted
upstream. Each chat first writes the note (write_note asks nothing), so a "deleted" only the server can say shows
the yes really ran the tool, and reading the note back after a "no" shows the no ran nothing.
Screenshots: test-artifacts/open_webui_approval_{asked,yes,no,first,again,chat}.png.
"""

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from app.chat.asking.approvals import DECLINED
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
    send,
    skip_without_open_webui,
    tool_result,
)

KEY = "sk-owui-key"
WAIT = 60_000  # ms: Open WebUI and the model on two busy cores
# What the person asks, each about one note; the scripted model calls the notes server's tool for it.
ASKS = {"Write a note called": "write_note", "Delete my note called": "delete_note", "Read my note called": "read_note"}
skip_without_open_webui()



def scripted(body: dict[str, Any]) -> Turn:
    """The model: one tool per request of the person's, then an answer quoting what the tool said."""
    person = person_asked(body)
    if person is None:  # Open WebUI's titles, tags and follow-ups
        return Turn(content="{}")
    asked, results = person.text, person.results
    if results and results[-1] == DECLINED:
        return Turn(content="I did not delete it, as you said.")
    if results:
        return Turn(content=f"Done: the notes server said {results[-1]}.")
    verb, _, note = asked.rpartition(" ")
    tool = ASKS.get(verb, "")
    arguments = {"name": note, "text": "milk and eggs"} if tool == "write_note" else {"name": note}
    name = offered_name(body, tool) if tool else None
    if name is None:
        return Turn(content="I cannot do that.")
    return Turn(content="Let me do that.", calls=[Call(name, arguments)])


@pytest.fixture(scope="module")
def model() -> FakeUpstream:
    return FakeUpstream(default=scripted)


@pytest.fixture(scope="module")
def gateway(model: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with keyed_gateway(model, tmp_path_factory.mktemp("owui-gateway"), {"files": stdio_entry("files.py")},
                       KEY) as gateway:
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


def _say(tab: Any, model: FakeUpstream, text: str, shows: str) -> list[dict[str, Any]]:
    """Sends `text`, waits until the page shows `shows`; the model's requests for it (no background tasks)."""
    from playwright.sync_api import expect

    before = len(model.chat_requests())
    send(tab, text)
    expect(tab.get_by_text(shows).last).to_be_visible(timeout=WAIT)
    return _model_requests(model, before)


def _ask_to_delete(tab: Any, model: FakeUpstream, note: str) -> None:
    """The note written, then its deletion asked for: the question is shown and nothing was run."""
    from playwright.sync_api import expect

    _say(tab, model, f"Write a note called {note}", f"Done: the notes server said wrote '{note}'")
    [asked] = _say(tab, model, f"Delete my note called {note}", "to refuse. Beyond this call")  # nothing ran
    tool = offered_name(asked, "delete_note")
    assert tool is not None and content_text(asked["messages"][-1]["content"]) == f"Delete my note called {note}"
    expect(tab.get_by_text("needs your approval").last).to_be_visible()
    expect(tab.locator("strong", has_text=tool).last).to_be_visible()  # the tool, named in bold
    expect(tab.get_by_text(f'name: "{note}"').last).to_be_visible()
    tab.get_by_text("Thought for").last.click()  # the default trace, in the reasoning Open WebUI folds away
    expect(tab.get_by_text(f"Waiting for your approval: {tool}").last).to_be_visible()


def test_yes_runs_the_tool_and_the_answer_comes_from_itstool_result(open_webui: str, model: FakeUpstream) -> None:
    with chat_page(open_webui, "open_webui_approval_yes.png") as tab:
        _ask_to_delete(tab, model, "groceries")
        tab.screenshot(path=str(ARTIFACTS / "open_webui_approval_asked.png"), full_page=True)
        [after_yes] = _say(tab, model, "yes", "Done: the notes server said deleted 'groceries'")
        seen = [m for m in after_yes["messages"] if m["role"] != "system"]
        assert seen[-3]["role"] == "user" and content_text(seen[-3]["content"]) == "Delete my note called groceries"
        assert seen[-2]["role"] == "assistant" and seen[-2]["tool_calls"][0]["function"]["name"].endswith(
            "__delete_note")
        assert seen[-1]["role"] == "tool" and tool_result(seen[-1]["content"]) == "deleted 'groceries'"  # the server's
        assert "approval" not in json.dumps(seen).lower()  # the model never sees the question
        assert not any(m["role"] == "user" and content_text(m["content"]) == "yes" for m in seen)


def test_no_runs_nothing_and_the_answer_says_so(open_webui: str, model: FakeUpstream) -> None:
    from playwright.sync_api import expect

    with chat_page(open_webui, "open_webui_approval_no.png") as tab:
        _ask_to_delete(tab, model, "shopping")
        [after_no] = _say(tab, model, "no", "I did not delete it, as you said.")
        assert tool_result(after_no["messages"][-1]["content"]) == DECLINED
        [_, answered] = _say(tab, model, "Read my note called shopping", "Done: the notes server said milk and eggs")
        assert tool_result(answered["messages"][-1]["content"]) == "milk and eggs"  # the note is still there
        expect(tab.get_by_text("deleted 'shopping'")).to_have_count(0)


# Found here first: keyed by the chat's text alone (Open WebUI sends no chat id by default), a second chat word for
# word like an answered one was told that nothing waits. Each question now carries its own reference.
def test_a_second_chat_like_an_answered_one_is_asked_and_runs_again(open_webui: str, model: FakeUpstream) -> None:
    from playwright.sync_api import expect

    for attempt in ("first", "again"):
        with chat_page(open_webui, f"open_webui_approval_{attempt}.png") as tab:
            _ask_to_delete(tab, model, "bread")
            send(tab, "yes")
            answer = tab.get_by_text(re.compile("Done: the notes server said deleted 'bread'|Nothing is waiting"))
            expect(answer.last).to_be_visible(timeout=WAIT)
            assert "deleted 'bread'" in answer.last.inner_text()


def test_yes_for_this_chat_runs_the_next_delete_in_the_chat_unasked(open_webui: str, model: FakeUpstream) -> None:
    """Issue 48: the person answers "yes for this chat"; deleting another note later in the same chat runs at once
    (Open WebUI sends no chat id by default: the chat is known by the exchange that granted it)."""
    from playwright.sync_api import expect

    with chat_page(open_webui, "open_webui_approval_chat.png") as tab:
        _ask_to_delete(tab, model, "butter")
        _say(tab, model, "yes for this chat", "Done: the notes server said deleted 'butter'")
        _say(tab, model, "Write a note called jam", "Done: the notes server said wrote 'jam'")
        # Two requests: the model's call, run at once, then its answer from the result (asked, it would be one).
        [_, deleted] = _say(tab, model, "Delete my note called jam", "Done: the notes server said deleted 'jam'")
        assert tool_result(deleted["messages"][-1]["content"]) == "deleted 'jam'"
        expect(tab.get_by_text("needs your approval")).to_have_count(1)  # the first delete's question alone
