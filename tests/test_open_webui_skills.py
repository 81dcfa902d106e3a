"""Issue 49's skills in Open WebUI itself (opt-in, see tests/support/open_webui.py): a server's skill loaded by the
model through `load_skill`, and by the person with a slash command typed in Open WebUI's message box.

Open WebUI -> the gateway -> tests/support/mcp_servers/skilled.py (two SKILL.md resources) and a scripted upstream.
Screenshots: test-artifacts/open_webui_skill_{model,slash}.png.
"""

from typing import Any

from app.openai.schemas import content_text
from tests.conftest import stdio_entry
from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.support.open_webui import (
    chat_page,
    offered_name,
    person_asked,
    scripted_chat,
    send,
    skip_without_open_webui,
)

KEY = "sk-owui-skills"
WAIT = 60_000  # ms: Open WebUI and the model on two busy cores
skip_without_open_webui()


def scripted(body: dict[str, Any]) -> Turn:
    """The model: loads the release-notes skill when asked for release notes; follows a skill it was given."""
    person = person_asked(body)
    if person is None:  # Open WebUI's titles, tags and follow-ups
        return Turn(content="{}")
    if person.results and "End with the word SHIPPED" in person.results[-1]:
        return Turn(content="Loaded by the model, followed: SHIPPED")
    if person.text.startswith("---\nname: release-notes") and person.text.endswith("for version 2.1"):
        return Turn(content="Loaded by the slash command, followed for version 2.1: SHIPPED")
    name = offered_name(body, "load_skill")
    assert name is not None
    return Turn(content="Loading the skill.", calls=[Call(name, {"name": "release-notes"})])


model, gateway, open_webui = scripted_chat("owui-skills", KEY, {"skilled": stdio_entry("skilled.py")}, scripted)


def test_the_model_loads_a_skill(open_webui: str) -> None:
    from playwright.sync_api import expect

    with chat_page(open_webui, "open_webui_skill_model.png") as tab:
        send(tab, "Write the release notes")
        expect(tab.get_by_text("Loaded by the model, followed: SHIPPED").last).to_be_visible(timeout=WAIT)


def test_the_person_loads_a_skill_with_a_slash_command(open_webui: str, model: FakeUpstream) -> None:
    from playwright.sync_api import expect

    with chat_page(open_webui, "open_webui_skill_slash.png") as tab:
        send(tab, "/release-notes for version 2.1")
        expect(tab.get_by_text("Loaded by the slash command, followed for version 2.1: SHIPPED").last).to_be_visible(
            timeout=WAIT)
    asked = [body for body in model.chat_requests() if (person := person_asked(body)) is not None
             and person.text.startswith("---\nname: release-notes")]
    assert asked and content_text(asked[-1]["messages"][-1]["content"]).endswith("for version 2.1")
