"""TOOLBRIDGE_NOTIFY_URL (issue 48) as an operator meets it: a real webhook receiver over HTTP in the test, a real
gateway, real MCP servers (a destructive tool over stdio; a server that changes a tool's definition; an OAuth-protected
server that needs a sign-in), a scripted upstream and the openai SDK. The webhook hears each of the three things once,
with a link to the status page, and never a key, the webhook's own secret path or (unless asked) an argument value."""

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.chat.memory.test_memory import ask
from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.support.servers import ServerThread
from tests.test_sign_in import protected_gateway, wait_state

KEY = "sk-notify-alice"
SECRET_PATH = "/services/T000/B000/XXXXsecretXXXX"
DEADLINE = 15.0


class Receiver:
    """A webhook: every body posted to it, as JSON."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self._arrived = threading.Condition()

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        with self._arrived:
            self.bodies.append(json.loads(body))
            self.paths.append(scope["path"])
            self._arrived.notify_all()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"ok"})

    def wait_for(self, event: str, count: int = 1) -> list[dict[str, Any]]:
        """The bodies of `event`, once `count` of them arrived (bounded: a notice that never comes fails the test)."""
        def found() -> list[dict[str, Any]]:
            return [body for body in self.bodies if body.get("event", "slack") == event]

        with self._arrived:
            assert self._arrived.wait_for(lambda: len(found()) >= count, timeout=DEADLINE), self.bodies
            return found()


@contextmanager
def webhook() -> Iterator[tuple[Receiver, str]]:
    receiver = Receiver()
    with ServerThread(receiver) as thread:
        yield receiver, f"{thread.url}{SECRET_PATH}"


def asked(gateway: Gateway, upstream: FakeUpstream, name: str) -> str:
    upstream.script(Turn(content="Deleting it.", calls=[Call("files__delete_note", {"name": name})]))
    return ask(gateway.client(KEY), [{"role": "user", "content": f"Delete {name}."}], stream=False)


@pytest.mark.parametrize("values", [False, True], ids=["without values", "with values"])
def test_a_call_that_waits_longer_than_the_set_time_is_told_once_without_its_values_unless_asked(
    upstream: FakeUpstream, tmp_path: Path, capsys: pytest.CaptureFixture[str], values: bool
) -> None:
    with webhook() as (receiver, url), running_gateway(
            tmp_path, {"files": stdio_entry("files.py")}, ready=["files"], key=KEY, upstream_url=f"{upstream.url}/v1",
            tool_trace="off", api_keys=KEY, notify_url=url, notify_after=0.5, notify_values=values,
            public_url="http://gateway.example:8000") as gateway:
        started = time.time()
        question = asked(gateway, upstream, "private-groceries")
        [notice] = receiver.wait_for("call_waiting")
        assert time.time() - started >= 0.5
        assert notice["tool"] == "files__delete_note" and notice["server"] == "files"
        assert notice["link"] == "http://gateway.example:8000/" and notice["reference"] in question
        assert re.match(r"A tool call has waited \d+ s for a person's approval: files__delete_note \(files\)",
                        notice["text"])
        assert ("private-groceries" in json.dumps(notice)) is values
        assert receiver.paths == [SECRET_PATH]
        asked(gateway, upstream, "second")
        assert len(receiver.wait_for("call_waiting", 2)) == 2  # the second round; the first is not told again
    logged = capsys.readouterr()
    assert "notice_sent" in logged.out
    assert [text for text in (KEY, SECRET_PATH, "XXXXsecretXXXX") if text in logged.out + logged.err] == []


def test_a_changed_definition_is_told_with_its_diff_and_slack_gets_text_alone(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    with webhook() as (receiver, url), running_gateway(
            tmp_path, {"mail": stdio_entry("drifting.py")}, ready=["mail"], upstream_url=f"{upstream.url}/v1",
            tool_trace="off", notify_url=url, notify_format="slack", public_url="https://tb.example") as gateway:
        upstream.script(Turn(content="Drifting.", calls=[Call("mail__drift", {})]), Turn(content="Done."))
        ask(gateway.client(), [{"role": "user", "content": "Drift."}], stream=False)
        [notice] = receiver.wait_for("slack")
        assert list(notice) == ["text"]
        assert notice["text"].startswith("The MCP server 'mail' changed the definition of its tool 'send_mail' since "
                                         "it was pinned")
        assert notice["text"].endswith("on the status page. https://tb.example/")


def test_a_server_that_needs_a_sign_in_is_told_once(upstream: FakeUpstream, tmp_path: Path) -> None:
    with webhook() as (receiver, url), protected_gateway(tmp_path, upstream, {"oauth": True}, notify_url=url) as (
            _, gateway):
        wait_state(gateway, "protected", "needs_sign_in")
        [notice] = receiver.wait_for("sign_in_needed")
        assert notice["server"] == "protected" and "press Sign in on the status page" in notice["text"]
        assert "token" not in json.dumps(notice).lower()
