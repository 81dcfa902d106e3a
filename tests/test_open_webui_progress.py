"""Issue 49's progress in Open WebUI itself (opt-in, see tests/support/open_webui.py): with the `details` trace, a tool
that takes seconds and reports progress shows each note in Open WebUI's reasoning block while it runs, before its
answer, and its finished tool widget after.

Open WebUI -> the gateway (TOOLBRIDGE_TOOL_TRACE=details) -> tests/support/mcp_servers/basic.py's `steps` (a note a
second) and a scripted upstream. Screenshot: test-artifacts/open_webui_progress.png.
"""

import re
from typing import Any

from tests.conftest import stdio_entry
from tests.support.fake_upstream import Call, Turn
from tests.support.open_webui import (
    chat_page,
    offered_name,
    person_asked,
    scripted_chat,
    send,
    skip_without_open_webui,
)

KEY = "sk-owui-progress"
WAIT = 60_000  # ms: Open WebUI and the model on two busy cores
skip_without_open_webui()


def scripted(body: dict[str, Any]) -> Turn:
    person = person_asked(body)
    if person is None:  # Open WebUI's titles, tags and follow-ups
        return Turn(content="{}")
    if person.results:
        return Turn(content=f"Finished: {person.results[-1]}.")
    name = offered_name(body, "steps")
    assert name is not None
    return Turn(content="Working on it.", calls=[Call(name, {"count": 4, "every": 1.5})])


model, gateway, open_webui = scripted_chat("owui-progress", KEY, {"basic": stdio_entry("basic.py")}, scripted,
                                           tool_trace="details")


def test_progress_shows_in_the_reasoning_while_the_tool_runs(open_webui: str) -> None:
    from playwright.sync_api import expect

    with chat_page(open_webui, "open_webui_progress.png") as tab:
        send(tab, "Take four slow steps")
        expect(tab.get_by_text("Working on it.").last).to_be_visible(timeout=WAIT)
        # Open WebUI folds the reasoning away ("Thinking...", "Thought for ..."): opened, it shows the notes
        tab.get_by_text(re.compile(r"^(Thinking|Thought for)")).last.click()
        expect(tab.get_by_text("basic__steps: step 2 (2/4)").last).to_be_visible(timeout=WAIT)
        assert tab.get_by_text("Finished:").count() == 0  # the call still runs: shown while it runs, not after
        expect(tab.get_by_text("Finished: 4 steps done.").last).to_be_visible(timeout=WAIT)
        expect(tab.get_by_text("basic__steps: step 4 (4/4)").last).to_be_attached()
