"""The status page in a real browser: Debian's Chromium, driven by Playwright (no browser download).

Outside CI the tests are skipped when Chromium is not installed (`apt-get install chromium`); in CI its
absence is a failure. Screenshots go to test-artifacts/.
"""

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright
from playwright.sync_api import Error as PlaywrightError

from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn
from tests.support.model_server import ModelServer

CHROMIUM = shutil.which("chromium")
KEY = "sk-page-key"
ARTIFACTS = Path(__file__).parent.parent / "test-artifacts"

if CHROMIUM is None and not os.environ.get("CI"):
    pytest.skip("Chromium not installed: apt-get install chromium", allow_module_level=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert CHROMIUM is not None, "CI must install Chromium: apt-get install chromium"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def keyed(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    # notes: delete_note is annotated destructive (asks by default), write_note asks by its `confirm`.
    servers = {"basic": stdio_entry("basic.py"), "wide": stdio_entry("wide.py"),
               "notes": stdio_entry("files.py") | {"confirm": ["write_*"]}, "skilled": stdio_entry("skilled.py")}
    with running_gateway(tmp_path_factory.mktemp("page"), servers, ready=("basic", "wide", "notes", "skilled"),
                         key=KEY, upstream_url=f"{upstream.url}/v1", api_keys=KEY) as gateway:
        yield gateway


@pytest.fixture
def page(
    browser: Browser, keyed: Gateway, request: pytest.FixtureRequest
) -> Iterator[tuple[Page, list[str], list[str]]]:
    """The page, logged in with the key; the console errors and every URL it asked for."""
    context = browser.new_context(http_credentials={"username": "me", "password": KEY})
    page = context.new_page()
    errors: list[str] = []
    requested: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("request", lambda request: requested.append(request.url))
    page.goto(f"{keyed.url}/")
    page.wait_for_selector("#servers tr[data-server=basic] td.ready")
    yield page, errors, requested
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    context.close()


def test_the_page_shows_the_servers_and_tools_and_asks_nothing_of_the_internet(
    page: tuple[Page, list[str], list[str]], keyed: Gateway
) -> None:
    tab, errors, requested = page
    row = tab.locator("#servers tr[data-server=basic]")
    assert row.locator("td").nth(1).inner_text() == "ready"
    assert row.locator("td").nth(4).inner_text() == "12"  # the basic server's tools
    tool = tab.locator("#tools details[data-tool=basic__echo]")
    tool.locator("summary").click()
    assert "As the server sent it" in tool.inner_text()
    changed = tab.locator("#tools details[data-tool=basic__sleep] .changes").text_content() or ""
    assert "properties.marker.default: removed (written into the description)" in changed
    tab.fill("#tool-filter", "weather")
    assert tab.locator("#tools details").count() == 1
    doors = [tab.locator("#doors tbody tr").nth(i).inner_text() for i in range(tab.locator("#doors tbody tr").count())]
    assert [door.split("\t")[:2] for door in doors] == [
        ["Chat Completions", f"{keyed.url}/v1"], ["Responses", f"{keyed.url}/v1"],
        ["Anthropic Messages", keyed.url], ["Ollama", keyed.url]]
    assert errors == []
    assert {urlsplit(url).hostname for url in requested} == {"127.0.0.1"}


def test_the_tools_that_ask_the_person_first_are_marked(page: tuple[Page, list[str], list[str]]) -> None:
    tab, errors, _ = page
    for asks in ("notes__delete_note", "notes__write_note"):
        marker = tab.locator(f"#tools details[data-tool={asks}] summary .asks")
        expect(marker).to_have_text("asks first")
        assert "person's yes" in (marker.get_attribute("title") or "")
    for plain in ("notes__read_note", "basic__echo", "basic__add"):
        assert tab.locator(f"#tools details[data-tool={plain}]").count() == 1
        assert tab.locator(f"#tools details[data-tool={plain}] .asks").count() == 0
    assert errors == []


def test_an_opened_tool_with_long_lines_fits_a_1280_pixel_window(
    browser: Browser, keyed: Gateway, request: pytest.FixtureRequest
) -> None:
    # A schema line, a URL or a pattern has no place to break: the page must wrap or scroll it inside its box,
    # not widen (a real server's tool made the page 3,713 px wide, its second column off-screen).
    context = browser.new_context(viewport={"width": 1280, "height": 800},
                                  http_credentials={"username": "me", "password": KEY})
    tab = context.new_page()
    tab.goto(f"{keyed.url}/")
    tab.select_option("#play-tool", "wide__catalogue")  # its field's hint is the long description
    tool = tab.locator("#tools details[data-tool=wide__catalogue]")
    tool.locator("summary").click()
    expect(tool.locator("pre").nth(1)).to_contain_text("option-number-59")
    tool.scroll_into_view_if_needed()
    ARTIFACTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    width = tab.evaluate("document.scrollingElement.scrollWidth")
    second = tool.locator(".columns > div").nth(1).bounding_box()
    context.close()
    assert width <= 1280
    assert second is not None and second["x"] + second["width"] <= 1280  # "As the server sent it" on screen


def test_a_call_through_the_chat_api_appears_within_a_second(
    page: tuple[Page, list[str], list[str]], keyed: Gateway, upstream: FakeUpstream
) -> None:
    tab, errors, _ = page
    tab.wait_for_selector("#live.ok")
    upstream.script(Turn(calls=[Call("basic__add", {"a": 20, "b": 22})]), Turn(content="42"))
    keyed.client(api_key=KEY).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "add"}])
    tab.wait_for_selector("#calls tr[data-tool=add]", timeout=1000)
    assert "ok" in tab.locator("#calls tr[data-tool=add]").first.inner_text()
    assert tab.locator(".spark").count() >= 1
    assert errors == []


def test_the_playground_runs_a_tool_and_shows_what_the_model_reads(page: tuple[Page, list[str], list[str]]) -> None:
    tab, errors, _ = page
    tab.select_option("#play-tool", "basic__add")
    tab.fill("#play-fields input[name=a]", "2")
    tab.fill("#play-fields input[name=b]", "3")
    tab.click("#playground button[type=submit]")
    expect(tab.locator("#play-result")).to_contain_text("success")  # the page's CSP forbids an eval to wait
    result: Any = tab.locator("#play-result").inner_text()
    assert '"status": "success"' in result and '"result": "5"' in result
    assert errors == []


def test_a_parameter_named_like_an_object_internal_reaches_the_tool(page: tuple[Page, list[str], list[str]]) -> None:
    # An argument named __proto__ assigned on a plain object sets its prototype and is lost from the call.
    tab, errors, _ = page
    sent = tab.evaluate("""() => {
        const field = document.createElement("input");
        Object.assign(field, {name: "__proto__", value: "kept"});
        field.dataset.kind = "string";
        document.getElementById("play-fields").replaceChildren(field);
        return JSON.stringify(argumentsFromForm());
    }""")
    assert sent == '{"__proto__":"kept"}'
    assert errors == []


@pytest.mark.parametrize("password", [None, "wrong"], ids=["no-key", "wrong-key"])
def test_without_the_key_the_page_is_refused(browser: Browser, keyed: Gateway, password: str | None) -> None:
    credentials = {"username": "me", "password": password} if password else None
    context = browser.new_context(http_credentials=credentials)  # type: ignore[arg-type]
    tab = context.new_page()
    try:  # without credentials Chromium gives up on the page; with wrong ones it shows the 401
        response = tab.goto(f"{keyed.url}/")
        assert response is not None and response.status == 401
    except PlaywrightError as error:
        assert "ERR_INVALID_AUTH_CREDENTIALS" in str(error)
    assert tab.locator("#servers").count() == 0
    for path in ("/", "/ui/page.js", "/ui/health", "/ui/calls"):
        response = context.request.get(f"{keyed.url}{path}")
        assert response.status == 401 and response.headers["www-authenticate"].startswith("Basic"), path
    context.close()


def test_the_restart_button_restarts_the_server(page: tuple[Page, list[str], list[str]]) -> None:
    tab, errors, _ = page
    row = tab.locator("#servers tr[data-server=basic]")
    before = int(row.locator("td").nth(5).inner_text())
    row.locator("button").click()
    expect(row.locator("td").nth(5)).to_have_text(str(before + 1), timeout=30_000)
    expect(row.locator("td").nth(1)).to_have_text("ready", timeout=30_000)
    assert errors == []


def test_sign_in_controls_and_notice_only_for_a_server_a_person_signs_in_to(
    page: tuple[Page, list[str], list[str]], keyed: Gateway
) -> None:
    # tests/test_sign_in_browser.py signs in for real; here: stdio servers get neither control, and the
    # callback's `?signed_in=NAME` (a link anyone can write) says nothing of another server, nor as HTML.
    tab, errors, _ = page
    servers = tab.locator("#servers tbody")
    assert servers.get_by_role("link", name="Sign in").count() == 0
    assert servers.get_by_role("button", name="Sign out").count() == 0
    for name in ("basic", "<img src=x onerror=alert(1)>", "__proto__"):
        tab.goto(f"{keyed.url}/?signed_in={quote(name)}")
        tab.wait_for_selector("#servers tr[data-server=basic] td.ready")
        expect(tab).to_have_url(f"{keyed.url}/")  # the page took the notice's word out of the address
        expect(tab.locator("#notice")).to_be_hidden()
        assert tab.locator("#notice").inner_text() == "" and tab.locator("img").count() == 0
    assert errors == []


def test_the_model_server_comes_first_and_turns_red_while_it_does_not_answer(
    browser: Browser, tmp_path: Path
) -> None:
    """Issue 45, C3: with LM Studio down the page stayed green and never named the model server."""
    model = ModelServer().start()
    try:
        with running_gateway(tmp_path, {}, upstream_url=model.base) as gateway:
            tab = browser.new_page(viewport={"width": 1280, "height": 800})
            try:
                watch_the_model_server_go_and_come_back(tab, gateway, model)
            finally:
                tab.close()  # its event stream would hold the gateway's shutdown
    finally:
        model.stop()


def watch_the_model_server_go_and_come_back(tab: Page, gateway: Gateway, model: ModelServer) -> None:
    tab.goto(f"{gateway.url}/")
    reach = tab.locator("#upstream-reach")
    expect(reach).to_have_text(re.compile(r"^answering since \d.* \(\d+ s\): LM Studio$"))
    expect(tab.locator("#upstream-url")).to_have_text(model.base)
    expect(tab.locator("#upstream-models")).to_have_text(
        "Loaded: qwen3-8b (8,192-token context); 1 more downloaded, not loaded")
    first = tab.locator("main > section").first
    assert first.get_attribute("id") == "upstream-section"  # above the MCP servers
    expect(tab.locator("#status")).to_have_text("ok")
    ARTIFACTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / "status_model_server_up.png"))
    model.stop()
    # The page asks every 5 s; the gateway looks again when asked.
    expect(reach).to_have_text(re.compile(r"^not answering since \d"), timeout=20_000)
    expect(tab.locator("#upstream-section")).to_have_class("upstream down")
    assert first.evaluate("section => getComputedStyle(section).borderLeftColor") == "rgb(185, 28, 28)"  # red
    expect(tab.locator("#status")).to_have_text("degraded")
    expect(tab.locator("#upstream-error")).to_contain_text("Start LM Studio's local server")
    expect(tab.locator("#upstream-models")).to_contain_text("As last seen at ")
    tab.screenshot(path=str(ARTIFACTS / "status_model_server_down.png"))
    model.start()
    expect(reach).to_have_text(re.compile(r"^answering since"), timeout=20_000)
    expect(tab.locator("#status")).to_have_text("ok")


def test_the_page_lists_the_servers_skills_with_the_tool_and_the_command_that_load_them(
    page: tuple[Page, list[str], list[str]]
) -> None:
    """Issue 49: tests/support/mcp_servers/skilled.py offers two skills as skill:// resources."""
    tab, errors, _ = page
    row = tab.locator("#skills tr[data-skill='skilled/release-notes']")
    expect(row).to_contain_text("/release-notes", timeout=10_000)
    expect(row).to_contain_text("Write release notes from a list of changes.")
    expect(row).to_contain_text("skilled__load_skill")
    expect(tab.locator("#skills tr[data-skill='skilled/haiku']")).to_contain_text("Answer in a haiku.")
    assert errors == []
