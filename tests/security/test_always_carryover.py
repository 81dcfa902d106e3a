"""Audit 2026-11-27, S6: "always" carried over to other chats that opened the same way.

For a client that sends no chat id (an SDK, curl, Chatbox, the Messages and Ollama doors) the conversation was
known by its system messages and first user message, so the person's "always" in one chat let a brand-new chat
with the same opening ("help me with my notes") run the destructive tool at once, with any arguments
(approvals_attack.py's last check: the note was deleted, no question asked). The attacker here is whoever opens a
chat the same way under the same key: a colleague sharing it, a script, or the person's own later chat. Now the
grant holds only while the history carries the exchange that granted it: the conversation that said "always"
goes on without asking, and a new one asks again. Since issue 48 that answer is "yes for this chat" ("always" now
means what it says: this key, until revoked, a choice the question offers by name).

Real HTTP to a real gateway, a real stdio server (tests/support/mcp_servers/files.py, `delete_note` destructive),
the openai SDK as the client; memory in SQLite and in a real redis-server.
"""

import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import Call, FakeUpstream, Turn

ALICE = "sk-alice-always"
SYSTEM = {"role": "system", "content": "You keep my notes."}
OPENING = {"role": "user", "content": "help me with my notes"}


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def notes(request: pytest.FixtureRequest, upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[Gateway]:
    store: dict[str, Any] = {}
    if request.param == "redis":
        store["state_url"] = request.getfixturevalue("redis_server").url
    with running_gateway(tmp_path_factory.mktemp(request.param), {"files": stdio_entry("files.py")}, ready=["files"],
                         key=ALICE, upstream_url=f"{upstream.url}/v1", tool_trace="off", api_keys=ALICE,
                         **store) as gateway:
        yield gateway


def chat(gateway: Gateway, messages: list[dict[str, Any]]) -> str:
    answer = gateway.client(ALICE).chat.completions.create(model="m", messages=messages)
    return answer.choices[0].message.content or ""


def note(gateway: Gateway, name: str, text: str | None = None) -> str:
    """Reads the note, or writes it first with `text`, through the status page's playground."""
    tool, arguments = ("write_note", {"name": name, "text": text}) if text else ("read_note", {"name": name})
    answer = httpx.post(f"{gateway.url}/ui/playground", json={"tool": f"files__{tool}", "arguments": arguments},
                        headers={"Authorization": f"Bearer {ALICE}"}, timeout=30)
    assert answer.status_code == 200, answer.text
    content: str = answer.json()["content"]
    return content


def deleting(name: str, after: str = "Deleted.") -> tuple[Turn, Turn]:
    return Turn(content="Deleting it.", calls=[Call("files__delete_note", {"name": name})]), Turn(content=after)


def test_always_in_one_chat_does_not_run_unasked_in_a_new_chat_that_opens_the_same_way(
    notes: Gateway, upstream: FakeUpstream
) -> None:
    first, second, third = (f"{word}-{secrets.token_hex(4)}" for word in ("first", "second", "third"))
    for name in (first, second, third):
        note(notes, name, "keep me")
    upstream.script(*deleting(first))
    question = chat(notes, [SYSTEM, OPENING])
    assert "needs your approval" in question
    granted = [SYSTEM, OPENING, {"role": "assistant", "content": question},
               {"role": "user", "content": "yes for this chat"}]
    assert chat(notes, granted) == "Deleted."
    assert "no note" in note(notes, first)

    upstream.script(*deleting(second))
    asked_again = chat(notes, [SYSTEM, OPENING])  # a brand-new chat, word for word chat 1's opening
    assert "needs your approval" in asked_again and f'"{second}"' in asked_again
    assert "keep me" in note(notes, second)

    upstream.script(*deleting(third, after="Deleted that too."))
    going_on = [*granted, {"role": "assistant", "content": "Deleted."}, {"role": "user", "content": "And the third."}]
    assert chat(notes, going_on) == "Deleting it.\n\nDeleted that too."  # chat 1 itself: not asked again
    assert "no note" in note(notes, third)
