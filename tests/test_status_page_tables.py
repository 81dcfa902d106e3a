"""The status page's tables at 1280×800 in Chromium (issue 45's C6): the long column of each table (a request's
"why", a waiting call's arguments, a call's error) takes the width it needs and wraps; the short ones keep each word
whole on one line. The audit saw `11:21:3`/`3 PM`, `req_605012cd`/`25b5c50f`, `qwen3`/`-8b`, `appro`/`val`.

The requests are Open WebUI's (its 36 tools, from the eval's fixture) beside the basic server's 12 under a budget
of 3 tools, so the budget withholds tools and says why; a write waits for approval with long arguments."""

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from bench.eval.tasks import client_tools
from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn
from tests.test_status_page import ARTIFACTS, KEY, browser  # noqa: F401 (the fixture, and its skip)

# The lines each cell's text takes: one per distinct top of its text's boxes.
LINES = """cell => {
  const range = document.createRange();
  range.selectNodeContents(cell);
  return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size;
}"""
SHORT = {"#requests": ["time", "request", "model", "API", "offered", "withheld"],
         "#waiting": ["approval", "asked", "tool", "server"]}


@pytest.fixture(scope="module")
def busy(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    servers = {"basic": stdio_entry("basic.py"), "notes": stdio_entry("files.py") | {"confirm": ["write_*"]}}
    with running_gateway(tmp_path_factory.mktemp("tables"), servers, ready=tuple(servers), key=KEY, api_keys=KEY,
                         upstream_url=f"{upstream.url}/v1", tool_budget=3) as gateway:
        yield gateway


@pytest.fixture
def tables(browser: Browser, busy: Gateway, upstream: FakeUpstream) -> Iterator[Page]:  # noqa: F811
    client = busy.client(api_key=KEY)
    upstream.script(Turn(content="It is noon."))
    client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "What time is it in UTC?"}],
                                   tools=client_tools("open_webui"))  # type: ignore[arg-type]
    text = "milk, eggs, flour, butter, sugar, " * 12
    upstream.script(Turn(content="Writing.", calls=[Call("notes__write_note", {"name": "groceries", "text": text})]))
    client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Write my groceries down."}])
    context = browser.new_context(viewport={"width": 1280, "height": 800},
                                  http_credentials={"username": "me", "password": KEY})
    tab = context.new_page()
    tab.goto(f"{busy.url}/")
    expect(tab.locator("#requests tbody tr")).to_have_count(2)
    expect(tab.locator("#waiting tbody tr")).to_have_count(1)
    yield tab
    ARTIFACTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / "status_page_tables_1280.png"), full_page=True)
    context.close()


def test_no_short_cell_breaks_a_word_at_1280_pixels(tables: Page) -> None:
    broken = []
    for table, columns in SHORT.items():
        headings = tables.locator(f"{table} thead th").all_inner_texts()
        for row in tables.locator(f"{table} tbody tr").all():
            for column in columns:
                cell = row.locator("td").nth(headings.index(column))
                if cell.inner_text().strip() and cell.evaluate(LINES) > 1:
                    broken.append(f"{table} {column}: {cell.inner_text()!r}")
        for heading in tables.locator(f"{table} thead th").all():
            if heading.inner_text().strip() and heading.evaluate(LINES) > 1:
                broken.append(f"{table} heading {heading.inner_text()!r}")
    assert not broken, broken
    # The long columns still wrap inside the page: nothing is pushed off to the right.
    assert tables.evaluate("document.scrollingElement.scrollWidth") <= 1280
    why = tables.locator("#requests tbody tr").last.locator("td").last.inner_text()
    assert why.startswith("past TOOLBRIDGE_TOOL_BUDGET (3 tools); the client's tools were sent compact")
