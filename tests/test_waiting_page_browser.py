"""The status page's Approve button in a real browser (Debian's Chromium, as tests/test_status_page.py): a chat
asks, the page lists the waiting call, a click approves it, and the chat's next message runs it."""

import json

from playwright.sync_api import Page, expect

from tests.chat.memory.test_memory import ask
from tests.conftest import Gateway
from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.test_status_page import KEY, browser, keyed, page  # noqa: F401 (the fixtures, and their skip)


def test_approve_on_the_page_and_the_next_message_runs_the_call(
    page: tuple[Page, list[str], list[str]], keyed: Gateway, upstream: FakeUpstream  # noqa: F811
) -> None:
    tab, errors, _ = page
    client = keyed.client(KEY)
    upstream.script(Turn(content="Deleting it.", calls=[Call("notes__delete_note", {"name": "groceries"})]))
    history = [{"role": "user", "content": "Delete groceries."}]
    history.append({"role": "assistant", "content": ask(client, history, stream=False)})

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
    upstream.script(Turn(content="Deleting it.", calls=[Call("notes__delete_note", {"name": "bread"})]))
    history = [{"role": "user", "content": "Delete bread."}]
    history.append({"role": "assistant", "content": ask(client, history, stream=False)})
    upstream.script(Turn(content="Done."))
    ask(client, [*history, {"role": "user", "content": "yes for 2 hours"}], stream=False)

    row = tab.locator("#grants tr", has_text="notes__delete_note")
    expect(row).to_contain_text("until", timeout=10_000)  # "until <the time it ends>"
    expect(row).to_contain_text("yes")
    row.get_by_role("button", name="Revoke").click()
    expect(tab.locator("#grants-none")).to_be_visible(timeout=10_000)
    upstream.script(Turn(content="Deleting it.", calls=[Call("notes__delete_note", {"name": "jam"})]))
    assert "needs your approval" in ask(client, [{"role": "user", "content": "Delete jam."}], stream=False)
    assert errors == []
