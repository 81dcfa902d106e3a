"""Issue 45's C8 in Open WebUI itself (opt-in, see tests/support/open_webui.py): with the `details` trace, a call
that waits for the person's yes was Open WebUI's tool widget not done yet, which spins ("Preparing
delete_note...") in the chat for good, also after the yes ran the call. It is now a finished, neutral block that
says it waits for the reply, and the yes still finds the waiting call (memory reads past the block).

Open WebUI -> the gateway (TOOLBRIDGE_TOOL_TRACE=details) -> the notes server (tests/support/mcp_servers/files.py:
`delete_note` asks first) and the scripted upstream of tests/test_open_webui_approvals.py.
Screenshots: test-artifacts/open_webui_details_waiting_{asked,yes}.png.
"""

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Gateway, stdio_entry
from tests.support.fake_upstream import MODEL, FakeUpstream
from tests.support.open_webui import ARTIFACTS, chat_page, keyed_gateway, running_open_webui, send
from tests.test_open_webui_approvals import KEY, WAIT, scripted

# Open WebUI's words for a tool widget that is not done: shown beside its spinner, and only then.
UNFINISHED = ("Preparing ", "Executing ")


@pytest.fixture(scope="module")
def model() -> FakeUpstream:
    return FakeUpstream(default=scripted)


@pytest.fixture(scope="module")
def gateway(model: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with keyed_gateway(model, tmp_path_factory.mktemp("owui-details"), {"files": stdio_entry("files.py")}, KEY,
                       tool_trace="details") as gateway:
        yield gateway


@pytest.fixture(scope="module")
def open_webui(gateway: Gateway, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_open_webui(f"{gateway.url}/v1", KEY, MODEL, tmp_path_factory.mktemp("owui-details-data")) as url:
        yield url


def _unfinished(tab: Any) -> list[str]:
    """The tool widgets on the page that show themselves unfinished (with a spinner)."""
    return [text for word in UNFINISHED for text in tab.get_by_text(word).all_inner_texts()]


def test_a_waiting_call_is_shown_finished_and_the_yes_runs_it(open_webui: str) -> None:
    from playwright.sync_api import expect

    with chat_page(open_webui, "open_webui_details_waiting_yes.png") as tab:
        send(tab, "Write a note called plans")
        expect(tab.get_by_text("Done: the notes server said wrote 'plans'").last).to_be_visible(timeout=WAIT)
        send(tab, "Delete my note called plans")
        expect(tab.get_by_text("to refuse. Beyond this call").last).to_be_visible(timeout=WAIT)  # the question
        tab.screenshot(path=str(ARTIFACTS / "open_webui_details_waiting_asked.png"), full_page=True)
        assert _unfinished(tab) == []
        waiting = tab.get_by_text("files__delete_note: waiting for your approval")
        expect(waiting.last).to_be_visible()
        waiting.last.click()  # opened, it says what happens next
        expect(tab.get_by_text("Not run yet: it runs if you reply").last).to_be_visible()

        send(tab, "yes")
        expect(tab.get_by_text("Done: the notes server said deleted 'plans'").last).to_be_visible(timeout=WAIT)
        expect(tab.get_by_text("View Result from files__delete_note").last).to_be_visible()  # ran, in its widget
        assert _unfinished(tab) == []  # the question's block did not turn into a spinner either
