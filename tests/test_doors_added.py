"""A door added as a sub-package and a line: the plain-text door of tests/doors/, registered through the app factory,
served over real HTTP beside the four doors: its chat answered by the tool loop (the MCP tool run), whole and
streamed, its errors in its own shape wherever they arise (its route, the guard, a path it does not serve), and
the other doors unchanged beside it."""

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.doors.registry import DOORS
from app.main import create_app
from tests.conftest import make_settings, servers_ready, stdio_entry, wait_for_health
from tests.doors.plain_text.routes import DOOR as PLAIN_TEXT
from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.support.servers import ServerThread

KEY = "sk-client-secret"
ANSWER = "The tool said hi."


@pytest.fixture(scope="module")
def gateway_url(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = make_settings(tmp_path_factory.mktemp("plain"), {"basic": stdio_entry("basic.py")},
                             upstream_url=f"{upstream.url}/v1", api_keys=KEY)
    with ServerThread(create_app(settings, doors=[*DOORS, PLAIN_TEXT])) as thread:  # the line
        wait_for_health(thread.url, servers_ready("basic"), key=KEY)
        yield thread.url


def echo_then_answer(upstream: FakeUpstream) -> None:
    upstream.script(Turn(content="Let me check.", calls=[Call("basic__echo", {"text": "hi"})]), Turn(content=ANSWER))


def ask(url: str, **body: object) -> httpx.Response:
    return httpx.post(f"{url}/test/chat", json={"model": "m", **body}, headers={"authorization": f"Bearer {KEY}"},
                      timeout=30)


def test_the_added_door_answers_with_the_tool_loop_whole_and_streamed(gateway_url: str, upstream: FakeUpstream) -> None:
    echo_then_answer(upstream)
    whole = ask(gateway_url, text="Echo hi, please.")
    assert whole.status_code == 200 and whole.headers["content-type"].startswith("text/plain")
    assert whole.text.startswith("Let me check.") and whole.text.endswith(ANSWER)
    sent = upstream.chat_requests()
    assert sent[0]["messages"][-1] == {"role": "user", "content": "Echo hi, please."}
    assert "echo: hi" in str(sent[1]["messages"])  # the MCP tool ran between the rounds

    echo_then_answer(upstream)
    streamed = ask(gateway_url, text="Echo hi, please.", stream=True)
    assert streamed.status_code == 200 and streamed.headers["content-type"].startswith("text/plain")
    assert streamed.text == whole.text


def test_the_added_doors_errors_come_in_its_own_shape(gateway_url: str) -> None:
    refused = ask(gateway_url, text="")  # its route's own refusal
    assert (refused.status_code, refused.json()) == (400, {"plain_error": "`text` is required: what to ask."})
    no_key = httpx.post(f"{gateway_url}/test/chat", json={"text": "hi"}, timeout=30)  # the guard's, before any route
    assert no_key.status_code == 401 and set(no_key.json()) == {"plain_error"}
    unknown = httpx.get(f"{gateway_url}/test/elsewhere", headers={"authorization": f"Bearer {KEY}"}, timeout=30)
    assert unknown.status_code == 404 and set(unknown.json()) == {"plain_error"}


def test_the_other_doors_keep_their_shapes_beside_it(gateway_url: str) -> None:
    headers = {"authorization": "Bearer wrong"}
    chat = httpx.post(f"{gateway_url}/v1/chat/completions", json={}, headers=headers, timeout=30)
    messages = httpx.post(f"{gateway_url}/v1/messages", json={}, headers=headers, timeout=30)
    ollama = httpx.post(f"{gateway_url}/api/chat", json={}, headers=headers, timeout=30)
    assert chat.status_code == messages.status_code == ollama.status_code == 401
    assert set(chat.json()["error"]) == {"message", "type", "param", "code"}
    assert messages.json()["type"] == "error" and messages.json()["error"]["type"] == "authentication_error"
    assert isinstance(ollama.json()["error"], str)


def test_without_the_line_the_door_is_not_there(tmp_path: Path) -> None:
    app = create_app(make_settings(tmp_path, None))
    assert "/test/chat" not in {getattr(route, "path", None) for route in app.routes}
    assert [door.name for door in app.state.doors] == ["chat", "responses", "messages", "ollama"]
