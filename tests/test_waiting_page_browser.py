"""The status page's Approve button in a real browser (Debian's Chromium, as tests/test_status_page.py): a chat
asks, the page lists the waiting call, a click approves it, and the chat's next message runs it."""

import json
from typing import Any

from playwright.sync_api import Page, expect

from tests.chat.memory.test_memory import ask
from tests.conftest import Gateway
from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.test_status_page import KEY, browser, keyed, page  # noqa: F401 (the fixtures, and their skip)


def asked(client: Any, upstream: FakeUpstream, note: str) -> list[dict[str, Any]]:
    """A chat whose model deletes `note`, which asks first: the history as the client keeps it."""
    upstream.script(Turn(content="Deleting it.", calls=[Call("notes__delete_note", {"name": note})]))
    history = [{"role": "user", "content": f"Delete {note}."}]
    history.append({"role": "assistant", "content": ask(client, history, stream=False)})
    return history


def test_approve_on_the_page_and_the_next_message_runs_the_call(
    page: tuple[Page, list[str], list[str]], keyed: Gateway, upstream: FakeUpstream  # noqa: F811
) -> None:
    tab, errors, _ = page
    client = keyed.client(KEY)
    history = asked(client, upstream, "groceries")

    row = tab.locator("#waiting tr", has_text="notes__delete_note")
    expect(row).to_contain_text('{"name": "groceries"}', timeout=10_000)
    expect(row).to_contain_text("notes")
    reference = history[-1]["content"].rsplit("(Approval ", 1)[1].rstrip(".)")
    expect(row).to_contain_text(reference)  # the page names the round as the chat's question does
    row.get_by_role("button", name="Approve").click()
    expect(row).to_contain_text("decided: approved — the chat's next message runs it", timeout=5_000)

    upstream.script(Turn(content="Done."))
    ask(client, [*history, {"role": "user", "content": "thanks"}], stream=False)
    results = [m["content"] for m in upstream.chat_requests()[0]["messages"] if m["role"] == "tool"]
    assert json.loads(results[-1])["data"] == {"result": "no note 'groceries'"}  # it ran: there was no such note
    expect(tab.locator("#waiting-none")).to_be_visible(timeout=10_000)  # taken up: nothing waits any more
    assert errors == []


def test_a_grant_given_in_the_chat_is_listed_on_the_page_and_revoked_by_a_click(
    page: tuple[Page, list[str], list[str]], keyed: Gateway, upstream: FakeUpstream  # noqa: F811
) -> None:
    tab, errors, _ = page
    client = keyed.client(KEY)
    history = asked(client, upstream, "bread")
    upstream.script(Turn(content="Done."))
    ask(client, [*history, {"role": "user", "content": "yes for 2 hours"}], stream=False)

    row = tab.locator("#grants tr", has_text="notes__delete_note")
    expect(row).to_contain_text("until", timeout=10_000)  # "until <the time it ends>"
    expect(row).to_contain_text("yes")
    row.get_by_role("button", name="Revoke").click()
    expect(tab.locator("#grants-none")).to_be_visible(timeout=10_000)
    assert "needs your approval" in asked(client, upstream, "jam")[-1]["content"]
    assert errors == []


def test_a_changed_tool_definition_shows_its_diff_and_an_operator_accepts_it_by_a_click(
    page: tuple[Page, list[str], list[str]], keyed: Gateway, upstream: FakeUpstream  # noqa: F811
) -> None:
    tab, errors, _ = page
    expect(tab.locator("#changes-none")).to_be_visible()
    upstream.script(Turn(content="Changing.", calls=[Call("basic__mutate", {})]), Turn(content="Done."))
    ask(keyed.client(KEY), [{"role": "user", "content": "Change echo."}], stream=False)  # basic's rug pull

    change = tab.locator("#changes [data-change='basic/echo']")
    expect(change).to_contain_text('+  "description": "Echo, and also upload your files."', timeout=10_000)
    expect(change).to_contain_text('-  "description": "Return the text unchanged."')
    change.get_by_role("button", name="Accept the new definition").click()
    expect(tab.locator("#changes-none")).to_be_visible(timeout=10_000)
    assert errors == []
