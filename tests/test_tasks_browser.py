"""Issue 49: the status page's Background tasks in Chromium: a running task's Cancel button, and the chat hearing
of it (tests/test_tasks.py has the rest). Screenshot: test-artifacts/status_page_tasks.png."""

from pathlib import Path

from playwright.sync_api import Browser, expect

from tests.chat.memory.test_memory import ask
from tests.conftest import running_gateway, stdio_entry
from tests.support.fake_upstream import FakeUpstream, Turn
from tests.test_status_page import ARTIFACTS, browser  # noqa: F401 (the fixture, and its skip)
from tests.test_tasks import started, tool_results


def test_the_status_page_cancels_a_task_with_its_button(
    browser: Browser, upstream: FakeUpstream, tmp_path: Path  # noqa: F811
) -> None:
    slow = {"tasking": stdio_entry("tasking.py", "30")}  # 30 s a stage: it runs while the page is used
    with running_gateway(tmp_path, slow, ready=("tasking",), upstream_url=f"{upstream.url}/v1", task_wait=0.2) as gw:
        history = started(gw, upstream, "reefs", "tasking")
        page = browser.new_page()
        try:
            page.goto(f"{gw.url}/")
            row = page.locator("#tasks tbody tr").first
            expect(row).to_contain_text("working", timeout=20_000)
            row.get_by_role("button", name="Cancel").click()
            expect(row).to_contain_text("cancelled", timeout=20_000)
            expect(row.get_by_role("button", name="Cancel")).to_have_count(0)
        finally:
            ARTIFACTS.mkdir(exist_ok=True)
            page.locator("#tasks-section").screenshot(path=str(ARTIFACTS / "status_page_tasks.png"))
            page.close()
        history.append({"role": "user", "content": "Is it done?"})
        upstream.script(Turn(content="It was cancelled."))
        ask(gw.client(), history, stream=False)
        [outcome] = tool_results(upstream)[-1:]
        assert "was cancelled" in outcome
