"""Issue 31 in Open WebUI itself (opt-in, see tests/support/open_webui.py): in a chat the person gets a sign-in
link instead of silence, and the next message after signing in uses the tools.

Open WebUI -> the gateway (no keys, as a one-person LM Studio setup has; the default trace) -> the protected MCP
server of tests/support/oauth_servers.py (`"oauth": true`, not signed in) and a scripted upstream whose model
calls protected__whoami when it is offered. "who am I?" ends with the gateway's line "> 🔑 To use protected's
tools, sign in: URL", a link in Open WebUI's markdown; the person follows it in the browser, allows at the
authorization server's consent page, lands on the gateway's status page; back in the same chat "who am I?" again
runs the tool, which only the signed-in server can answer ("alice"), and the link is not shown a second time.
Screenshots: test-artifacts/open_webui_sign_in_{link,consent,status_page,after}.png.
"""

import json
from collections.abc import Iterator
from typing import Any

import pytest

from app.openai.schemas import content_text
from tests.conftest import Gateway, running_gateway
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn
from tests.support.oauth_servers import OAuthPair
from tests.support.open_webui import (
    ARTIFACTS,
    chat_page,
    offered_name,
    person_asked,
    running_open_webui,
    send,
    skip_without_open_webui,
    tool_result,
)
from tests.support.servers import ServerThread
from tests.test_sign_in import wait_state

WAIT = 60_000  # ms: Open WebUI and the model on two busy cores
SIGN_IN_PATH = "/ui/servers/protected/sign-in"
LINE = "To use protected's tools, sign in:"
NOT_YET = "I cannot see who you are yet."
skip_without_open_webui()


def scripted(body: dict[str, Any]) -> Turn:
    """The model: calls protected__whoami when it is offered, then says what it answered."""
    person = person_asked(body)
    if person is None:  # Open WebUI's titles, tags and follow-ups
        return Turn(content="{}")
    results = person.results
    if results:
        return Turn(content=f"You are **{results[-1]}**.")
    tool = offered_name(body, "whoami", "protected")
    if tool is None:
        return Turn(content=NOT_YET)
    return Turn(content="Let me look.", calls=[Call(tool, {})])


@pytest.fixture(scope="module")
def model() -> FakeUpstream:
    return FakeUpstream(default=scripted)


@pytest.fixture(scope="module")
def pair() -> Iterator[OAuthPair]:
    with OAuthPair.start() as pair:
        yield pair


@pytest.fixture(scope="module")
def gateway(model: FakeUpstream, pair: OAuthPair, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    servers = {"protected": {"url": pair.mcp_server.mcp_url, "oauth": True}}
    with ServerThread(model.app) as upstream, running_gateway(
        tmp_path_factory.mktemp("owui-gateway"), servers, upstream_url=f"{upstream.url}/v1",
    ) as gateway:
        wait_state(gateway, "protected", "needs_sign_in")
        yield gateway


@pytest.fixture(scope="module")
def open_webui(gateway: Gateway, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # The gateway has no keys: Open WebUI's connection still sends one, which it ignores.
    with running_open_webui(f"{gateway.url}/v1", "sk-unused", MODEL, tmp_path_factory.mktemp("owui-data")) as url:
        yield url


def _asked(model: FakeUpstream, since: int, question: str) -> list[dict[str, Any]]:
    """The model's requests since `since` for the person's `question` (not Open WebUI's background tasks)."""
    def person(body: dict[str, Any]) -> bool:
        users = [m for m in body["messages"] if m["role"] == "user"]
        return bool(users) and content_text(users[-1].get("content")) == question
    return [body for body in model.chat_requests()[since:] if person(body)]


def _shot(tab: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / f"open_webui_sign_in_{name}.png"), full_page=True)


def _system(body: dict[str, Any]) -> str:
    return "\n".join(content_text(m.get("content")) for m in body["messages"] if m["role"] == "system")


def test_the_answer_links_to_the_sign_in_and_after_it_the_next_message_uses_the_tool(
    open_webui: str, gateway: Gateway, pair: OAuthPair, model: FakeUpstream
) -> None:
    from playwright.sync_api import expect

    link_url = f"{gateway.url}{SIGN_IN_PATH}"
    with chat_page(open_webui, "open_webui_sign_in_after.png") as tab:
        before = len(model.chat_requests())
        send(tab, "who am I?")
        quote = tab.locator("blockquote", has_text=LINE).last
        expect(quote).to_be_visible(timeout=WAIT)
        expect(tab.get_by_text(NOT_YET).last).to_be_visible()
        assert quote.inner_text().strip() == f"🔑 {LINE} {link_url}"
        link = quote.locator(f'a[href="{link_url}"]')
        expect(link).to_have_text(link_url)  # Open WebUI's markdown made the bare address a link
        [first] = _asked(model, before, "who am I?")
        assert offered_name(first, "whoami", "protected") is None
        assert "'protected' are unavailable until the user signs in" in _system(first)
        _shot(tab, "link")

        # The link, followed as a person clicks it (Open WebUI opens links in a new tab).
        with tab.context.expect_page() as opened:
            link.click()
        browser_tab = opened.value
        browser_tab.wait_for_url(f"{pair.authorization_server.issuer}/consent?**", timeout=WAIT)
        expect(browser_tab.get_by_role("heading", level=1)).to_contain_text("to use your account?")
        _shot(browser_tab, "consent")
        browser_tab.get_by_role("button", name="Allow").click()
        browser_tab.wait_for_url(f"{gateway.url}/", timeout=WAIT)
        expect(browser_tab.locator("#notice")).to_contain_text(
            "Signed in to protected. Its tools are offered from your next message", timeout=WAIT)
        row = browser_tab.locator("#servers tr[data-server=protected]")
        expect(row.locator("td").nth(1)).to_have_text("ready", timeout=WAIT)
        _shot(browser_tab, "status_page")
        browser_tab.close()
        assert pair.authorization_server.provider.authorizations == ["alice"]

        # Back in the same chat: the same question runs the tool, and the link is not shown again.
        tab.bring_to_front()
        before = len(model.chat_requests())
        send(tab, "who am I?")
        expect(tab.get_by_text("You are alice.")).to_be_visible(timeout=WAIT)
        expect(tab.locator("blockquote", has_text=LINE)).to_have_count(1)
        expect(tab.locator(f'a[href="{link_url}"]')).to_have_count(1)
        offered, answered = _asked(model, before, "who am I?")
        assert offered_name(offered, "whoami", "protected") == "protected__whoami"
        assert "unavailable" not in _system(offered)
        assert tool_result(answered["messages"][-1]["content"]) == "alice"
        # The model never saw the link: the gateway took its line out of the history Open WebUI sent back.
        assert SIGN_IN_PATH not in json.dumps(offered["messages"])
        assert NOT_YET in json.dumps(offered["messages"])
        # Open WebUI's background tasks (titles, tags, follow-ups) were neither told of the server nor given tools.
        tasks = [body for body in model.chat_requests() if "### Task:" in json.dumps(body["messages"])]
        assert tasks and not [body for body in tasks if "unavailable" in _system(body) or body.get("tools")]
