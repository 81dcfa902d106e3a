"""Skills (issue 49) as the model and an operator meet them: a real stdio server with two SKILL.md documents as
`skill://{name}/SKILL.md` resources (tests/support/mcp_servers/skilled.py), a scripted upstream, the openai SDK. The
model is offered `skilled__load_skill`, its description listing the skills; its call reads the document, which the
model is given; the status page lists the skills. An ordinary resource is no skill."""

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.chat.memory.test_memory import ask
from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import Call, FakeUpstream, Turn

SERVERS = {"skilled": stdio_entry("skilled.py")}


@pytest.fixture(scope="module")
def skilled(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with running_gateway(tmp_path_factory.mktemp("skilled"), SERVERS, ready=["skilled"],
                         upstream_url=f"{upstream.url}/v1", tool_trace="off") as gateway:
        yield gateway


def offered(upstream: FakeUpstream) -> dict[str, Any]:
    return {tool["function"]["name"]: tool["function"] for tool in upstream.chat_requests()[0]["tools"]}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_model_loads_a_skill_by_name_and_reads_its_instructions(
    skilled: Gateway, upstream: FakeUpstream, stream: bool
) -> None:
    load = Call("skilled__load_skill", {"name": "release-notes"})
    upstream.script(Turn(content="Loading it.", calls=[load]), Turn(content="Added: dark mode (#15). SHIPPED"))
    answer = ask(skilled.client(), [{"role": "user", "content": "Write the release notes."}], stream=stream)
    assert answer.endswith("SHIPPED")
    tools = offered(upstream)
    loader = tools["skilled__load_skill"]
    assert "- release-notes: Write release notes from a list of changes." in loader["description"]
    assert "- haiku: Answer in a haiku." in loader["description"] and "readme" not in loader["description"]
    assert loader["parameters"]["properties"]["name"]["enum"] == ["release-notes", "haiku"]
    [result] = [m["content"] for m in upstream.chat_requests()[-1]["messages"] if m["role"] == "tool"]
    assert "3. End with the word SHIPPED." in json.dumps(json.loads(result))


def test_an_unknown_skill_is_an_argument_error_the_model_can_fix(skilled: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(calls=[Call("skilled__load_skill", {"name": "limerick"})]), Turn(content="None such."))
    ask(skilled.client(), [{"role": "user", "content": "A limerick, please."}], stream=False)
    [result] = [m["content"] for m in upstream.chat_requests()[-1]["messages"] if m["role"] == "tool"]
    assert json.loads(result)["status"] == "error" and "release-notes" in result  # the allowed names, to fix it


def test_the_status_page_lists_the_skills(skilled: Gateway) -> None:
    listed = httpx.get(f"{skilled.url}/ui/skills", timeout=10).json()["data"]
    assert [(s["server"], s["name"], s["uri"], s["load_with"]) for s in listed] == [
        ("skilled", "release-notes", "skill://release-notes/SKILL.md", "skilled__load_skill"),
        ("skilled", "haiku", "skill://haiku/SKILL.md", "skilled__load_skill")]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_slash_command_puts_the_skill_and_the_request_before_the_model(
    skilled: Gateway, upstream: FakeUpstream, stream: bool
) -> None:
    upstream.script(Turn(content="Added: dark mode (#15). SHIPPED"))
    answer = ask(skilled.client(), [{"role": "user", "content": "/release-notes for version 2.1"}], stream=stream)
    assert answer == "Added: dark mode (#15). SHIPPED"
    [sent] = [m for m in upstream.chat_requests()[0]["messages"] if m["role"] == "user"]
    assert sent["content"].startswith("---\nname: release-notes\n")
    assert sent["content"].endswith("3. End with the word SHIPPED.\n\n---\n\nfor version 2.1")


def test_the_prompts_list_names_the_skills(skilled: Gateway, upstream: FakeUpstream) -> None:
    before = len(upstream.chat_requests())
    listed = ask(skilled.client(), [{"role": "user", "content": "/prompts"}], stream=False)
    assert "- `/release-notes [what to do]`: (skill) Write release notes from a list of changes." in listed
    assert "- `/haiku [what to do]`: (skill) Answer in a haiku." in listed
    assert len(upstream.chat_requests()) == before  # the gateway answered it, not the model
