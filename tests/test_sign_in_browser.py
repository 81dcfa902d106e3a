"""Issue 31: a person signs the gateway in to a protected MCP server from the status page, in a real browser
(Debian's Chromium through Playwright, as tests/test_status_page.py; skipped without it outside CI).

The gateway has an API key, sent as the page's Basic credentials; the server is the real authorization server
and protected MCP server of tests/support/oauth_servers.py. The page's "Sign in" link takes the browser to the
authorization server's consent page and, after "Allow", back through the gateway's callback to the status page,
where the server turns ready by the page's own live updates; a tool is then called through the chat API; "Sign
out" puts the server back to waiting. A "Deny" ends on the gateway's own small page with the way back. A key that
may not change the shared sign-in (issue 43 S2) is offered neither button.
Screenshots go to test-artifacts/.
"""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, expect

from tests.conftest import Gateway
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn
from tests.support.oauth_servers import OAuthPair
from tests.test_sign_in import Person, protected_gateway, wait_state
from tests.test_status_page import ARTIFACTS, browser  # noqa: F401 (the fixture, and the module's skip)

KEY = "sk-test"
SETTLES = 30_000  # ms: a connection, a sign-in or a reconnection, bounded


class Visit:
    """A browser tab with the gateway's key as Basic credentials, the errors the gateway's pages wrote, and the
    addresses the tab went to."""

    def __init__(self, browser: Browser, gateway: Gateway) -> None:  # noqa: F811
        self.gateway = gateway
        self.context = browser.new_context(http_credentials={"username": "me", "password": KEY})
        self.tab: Page = self.context.new_page()
        self.errors: list[str] = []
        self.visited: list[str] = []
        self.tab.on("console", self._console)
        self.tab.on("pageerror", lambda error: self.errors.append(str(error)))
        self.tab.on("framenavigated", lambda frame: self.visited.append(frame.url) if frame.parent_frame is None
                    else None)

    def _console(self, message: ConsoleMessage) -> None:
        # The gateway's pages only: the test's authorization server has no favicon, and that is no finding.
        if message.type == "error" and message.location["url"].startswith(f"{self.gateway.url}/"):
            self.errors.append(f"{message.location['url']}: {message.text}")

    def screenshot(self, name: str) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        self.tab.screenshot(path=str(ARTIFACTS / f"sign-in-{name}.png"), full_page=True)


@pytest.fixture
def signing(tmp_path: Path, upstream: FakeUpstream) -> Iterator[tuple[OAuthPair, Gateway]]:
    with protected_gateway(tmp_path, upstream, {"oauth": True}, api_keys=KEY) as (pair, gateway):
        yield pair, gateway


@pytest.fixture
def visit(browser: Browser, signing: tuple[OAuthPair, Gateway]) -> Iterator[Visit]:  # noqa: F811
    visit = Visit(browser, signing[1])
    yield visit
    visit.context.close()


def whoami(gateway: Gateway, upstream: FakeUpstream) -> str:
    """tests/test_sign_in.py's `whoami_through_the_chat`, with the key this gateway wants."""
    upstream.script(Turn(calls=[Call("protected__whoami", {})]), Turn(content="done"))
    gateway.client(KEY).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "who am I?"}])
    result = json.loads(upstream.chat_requests()[1]["messages"][-1]["content"])
    assert result["status"] == "success", result
    return str(result.get("content", result))


def open_the_consent_page(visit: Visit, pair: OAuthPair) -> None:
    """The status page, the server waiting, its "Sign in" link followed to the authorization server's page."""
    tab = visit.tab
    tab.goto(f"{visit.gateway.url}/")
    row = tab.locator("#servers tr[data-server=protected]")
    expect(row.locator("td").nth(1)).to_have_text("needs_sign_in", timeout=SETTLES)
    link = row.get_by_role("link", name="Sign in")
    assert link.get_attribute("href") == "/ui/servers/protected/sign-in"
    assert row.get_by_role("button", name="Sign out").count() == 0
    visit.screenshot("1-needs-sign-in")
    link.click()
    tab.wait_for_url(f"{pair.authorization_server.issuer}/consent?**")
    expect(tab.get_by_role("heading", level=1)).to_contain_text("to use your account?")


def test_sign_in_from_the_page_a_tool_through_the_chat_and_sign_out(
    visit: Visit, signing: tuple[OAuthPair, Gateway], upstream: FakeUpstream
) -> None:
    pair, gateway = signing
    tab = visit.tab
    open_the_consent_page(visit, pair)
    visit.screenshot("2-consent")
    tab.get_by_role("button", name="Allow").click()

    expect(tab.locator("#notice")).to_contain_text(
        "Signed in to protected. Its tools are offered from your next message", timeout=SETTLES)
    assert f"{gateway.url}/?signed_in=protected" in visit.visited  # the callback's redirect, followed
    assert tab.url == f"{gateway.url}/"  # the notice is said once: a reload does not repeat it
    row = tab.locator("#servers tr[data-server=protected]")
    expect(row.locator("td").nth(1)).to_have_text("ready", timeout=SETTLES)  # the page's live updates
    expect(row.locator("td").nth(4)).to_have_text("2")
    expect(row.get_by_role("button", name="Sign out")).to_be_visible()
    assert row.get_by_role("link", name="Sign in").count() == 0
    expect(tab.locator("#tools details[data-tool=protected__whoami]")).to_have_count(1, timeout=SETTLES)
    visit.screenshot("3-signed-in")

    assert "alice" in whoami(gateway, upstream)
    assert pair.authorization_server.provider.authorizations == ["alice"]

    row.get_by_role("button", name="Sign out").click()
    expect(row.locator("td").nth(1)).to_have_text("needs_sign_in", timeout=SETTLES)
    expect(row.get_by_role("link", name="Sign in")).to_be_visible()
    assert row.get_by_role("button", name="Sign out").count() == 0
    expect(tab.locator("#notice")).to_be_hidden()
    visit.screenshot("4-signed-out")
    assert visit.errors == []


def test_a_deny_at_the_consent_page_ends_on_the_gateways_page_with_the_way_back(
    visit: Visit, signing: tuple[OAuthPair, Gateway]
) -> None:
    pair, gateway = signing
    tab = visit.tab
    open_the_consent_page(visit, pair)
    with tab.expect_navigation(url=f"{gateway.url}/oauth/callback?**") as navigation:
        tab.get_by_role("button", name="Deny").click()
    response = navigation.value
    assert response is not None and response.status == 400
    expect(tab.get_by_role("heading", level=1)).to_have_text("Sign-in not finished")
    expect(tab.locator("body")).to_contain_text("was not given")
    visit.screenshot("5-denied")
    tab.get_by_role("link", name="Back to the status page").click()
    row = tab.locator("#servers tr[data-server=protected]")
    expect(row.locator("td").nth(1)).to_have_text("needs_sign_in", timeout=SETTLES)
    expect(tab.locator("#notice")).to_be_hidden()
    assert not pair.authorization_server.provider.access_tokens
    assert len(visit.errors) == 1 and "/oauth/callback?error=access_denied" in visit.errors[0]  # its own 400


def test_after_sign_out_the_page_lists_none_of_the_servers_tools(
    visit: Visit, signing: tuple[OAuthPair, Gateway]
) -> None:
    # At its first start a server waiting for a sign-in offers no tools; after a sign-out it must be the same,
    # or the model is offered tools whose every call fails.
    gateway = signing[1]
    wait_state(gateway, "protected", "needs_sign_in", key=KEY)
    assert Person(gateway, KEY).sign_in("protected").status_code == 303
    tab = visit.tab
    tab.goto(f"{gateway.url}/")
    expect(tab.locator("#tools details[data-tool=protected__whoami]")).to_have_count(1, timeout=SETTLES)
    tab.locator("#servers tr[data-server=protected]").get_by_role("button", name="Sign out").click()
    expect(tab.locator("#servers tr[data-server=protected] td").nth(1)).to_have_text("needs_sign_in",
                                                                                      timeout=SETTLES)
    expect(tab.locator("#tools details")).to_have_count(0, timeout=5_000)


def test_a_key_that_may_not_sign_the_shared_server_in_is_offered_neither_sign_in_nor_sign_out(
    browser: Browser, tmp_path: Path, upstream: FakeUpstream  # noqa: F811
) -> None:
    limited = "sk-limited-page"
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"keys": {limited: {"servers": ["protected"], "name": "carol"}}}))
    with protected_gateway(tmp_path, upstream, {"oauth": True}, api_keys=KEY, keys_file=keys) as (_, gateway):
        context = browser.new_context(http_credentials={"username": "me", "password": limited})
        tab = context.new_page()
        tab.goto(f"{gateway.url}/")
        row = tab.locator("#servers tr[data-server=protected]")
        expect(row.locator("td").nth(1)).to_have_text("needs_sign_in", timeout=SETTLES)
        expect(row).to_contain_text("waits for the operator's sign-in")
        assert row.get_by_role("link", name="Sign in").count() == 0
        assert Person(gateway, KEY).sign_in("protected").status_code == 303  # the operator's key
        expect(row.locator("td").nth(1)).to_have_text("ready", timeout=SETTLES)  # the page's live updates
        assert row.get_by_role("button", name="Sign out").count() == 0
        ARTIFACTS.mkdir(exist_ok=True)
        tab.screenshot(path=str(ARTIFACTS / "sign-in-6-limited-key.png"), full_page=True)
        context.close()
