"""A toolset limits prompts and resources as it limits tools (issue 45's observation: `/prompts` under
`MODEL+SET` listed the prompts of servers outside the set). Through the gateway over real HTTP, with two real
stdio servers: `basic` (tools, no prompts) and `library` (tools, prompts and resources).

A set, the X-Toolbridge-Tools header or `metadata.toolbridge_tools` that names a server gives its prompts and
resources (its `read_resource` tool too); one that names only some tools of a server gives those tools alone.
"""

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import MODEL, FakeUpstream, Turn

TOOLSETS = {"plain": ["basic"], "books": ["library"], "finder": ["find_note"]}
READER = "library__read_resource"


@pytest.fixture(scope="module")
def two(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    servers = {"basic": stdio_entry("basic.py"), "library": stdio_entry("library.py")}
    with running_gateway(tmp_path_factory.mktemp("toolset-prompts"), servers, ready=("basic", "library"),
                         upstream_url=f"{upstream.url}/v1", toolsets=TOOLSETS) as gateway:
        yield gateway


def answer(gateway: Gateway, text: str, model: str = MODEL, **options: Any) -> str:
    completion = gateway.client().chat.completions.create(
        model=model, messages=[{"role": "user", "content": text}], **options)
    return completion.choices[0].message.content or ""


def listed(gateway: Gateway, route: str, **options: Any) -> list[str]:
    response = httpx.get(f"{gateway.url}/{route}", timeout=30, **options)
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    return [entry["command"] if "command" in entry else entry["function"]["name"] if "function" in entry
            else entry["server"] for entry in data]


def test_prompts_under_a_toolset_are_its_servers_alone(two: Gateway, upstream: FakeUpstream) -> None:
    upstream.script()  # the upstream is the session's: what earlier tests sent it is forgotten
    assert "/greet" in answer(two, "/prompts", f"{MODEL}+books")
    assert answer(two, "/prompts", f"{MODEL}+plain") == "No MCP server offers prompts."
    assert answer(two, "/prompts", f"{MODEL}+finder") == "No MCP server offers prompts."  # a tool, not its server
    # The header and the metadata choose the same way, on a model of no set.
    header = {"extra_headers": {"X-Toolbridge-Tools": "-library"}}
    assert answer(two, "/prompts", **header) == "No MCP server offers prompts."
    assert answer(two, "/prompts", metadata={"toolbridge_tools": "basic"}) == "No MCP server offers prompts."
    assert upstream.chat_requests() == []  # answered by the gateway every time


def test_a_prompt_outside_the_set_is_not_run_and_the_line_reaches_the_model(
    two: Gateway, upstream: FakeUpstream
) -> None:
    upstream.script(Turn(content="A plain answer."), Turn(content="Hello, Ada!"))
    assert answer(two, "/greet name=Ada", f"{MODEL}+plain") == "A plain answer."
    assert answer(two, "/greet name=Ada", f"{MODEL}+books") == "Hello, Ada!"
    outside, inside = upstream.chat_requests()
    assert outside["messages"][-1]["content"] == "/greet name=Ada"  # as typed: no prompt of the set's servers
    assert inside["messages"][-1]["content"] == "Write a plain greeting for Ada."


def test_the_prompts_and_resources_routes_follow_the_model_and_the_header(two: Gateway) -> None:
    assert "/greet" in listed(two, "prompts") and listed(two, "resources") == ["library"]
    for options in ({"params": {"model": f"{MODEL}+plain"}}, {"params": {"model": f"{MODEL}+finder"}},
                    {"headers": {"X-Toolbridge-Tools": "-library"}}):
        assert listed(two, "prompts", **options) == []
        assert listed(two, "resources", **options) == []
        assert READER not in listed(two, "tools", **options)  # nor the tool that reads them
    books = {"params": {"model": f"{MODEL}+books"}}
    assert "/greet" in listed(two, "prompts", **books) and listed(two, "resources", **books) == ["library"]
    assert READER in listed(two, "tools", **books)


def test_a_name_that_is_nothing_is_a_400_on_the_routes_too(two: Gateway) -> None:
    for route in ("prompts", "resources"):
        response = httpx.get(f"{two.url}/{route}", headers={"X-Toolbridge-Tools": "nosuch"})
        assert response.status_code == 400 and response.json()["error"]["param"] == "X-Toolbridge-Tools"
