"""Issue 49's MCP tasks in Open WebUI itself (opt-in, see tests/support/open_webui.py): a research task started in
one message runs on after the answer, the person chats on, and a later message's answer uses its result.

Open WebUI -> the gateway (TOOLBRIDGE_TASK_WAIT 0.5 s) -> server-everything's `simulate-research-query` (four stages
of a second) and a scripted upstream. Screenshot: test-artifacts/open_webui_task.png.
"""

import time
from typing import Any

from tests.support.fake_upstream import Call, Turn
from tests.support.open_webui import (
    chat_page,
    offered_name,
    person_asked,
    scripted_chat,
    send,
    skip_without_open_webui,
)
from tests.test_reference_servers import EVERYTHING

KEY = "sk-owui-tasks"
WAIT = 60_000  # ms: Open WebUI and the model on two busy cores
PERSON_PAUSE = 1.0  # seconds between the person's messages
DONE = "The research is done: RESEARCH-DONE"
skip_without_open_webui()


def scripted(body: dict[str, Any]) -> Turn:
    """The model: starts the research when asked; then says what the gateway told it of the task."""
    person = person_asked(body)
    if person is None:  # Open WebUI's titles, tags and follow-ups
        return Turn(content="{}")
    said = "\n".join(person.results)
    if "Research Report: tides" in said:
        return Turn(content=DONE)
    if "still running" in said:
        return Turn(content="Still running.")
    if "started a background task" in said:
        return Turn(content="The research is running in the background.")
    name = offered_name(body, "simulate-research-query")
    assert name is not None
    return Turn(content="Starting the research.", calls=[Call(name, {"topic": "tides"})])


model, gateway, open_webui = scripted_chat("owui-tasks", KEY, {"everything": {"command": str(EVERYTHING)}}, scripted,
                                           task_wait=0.5)


def test_a_task_started_in_one_message_answers_a_later_one(open_webui: str) -> None:
    from playwright.sync_api import expect

    with chat_page(open_webui, "open_webui_task.png") as tab:
        send(tab, "Research the tides")
        expect(tab.get_by_text("The research is running in the background.").last).to_be_visible(timeout=WAIT)
        deadline = time.monotonic() + WAIT / 1000
        while not tab.get_by_text(DONE).count():
            assert time.monotonic() < deadline, "the task's result never reached the chat"
            time.sleep(PERSON_PAUSE)  # a person's pace; what ends the loop is the result in the chat
            answers = tab.get_by_text("Still running.").or_(tab.get_by_text(DONE))
            shown = answers.count()
            send(tab, "Is it done?")
            expect(answers).to_have_count(shown + 1, timeout=WAIT)  # this message's answer, drawn
        expect(tab.get_by_text(DONE).last).to_be_visible(timeout=WAIT)
