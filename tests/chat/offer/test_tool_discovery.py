"""TOOLBRIDGE_TOOL_DISCOVERY=find_tools (app/chat/tool_discovery.py): past the budget the model gets one find_tools
tool, then the definitions of the tools it found. Through a real gateway with the official SDK, streamed and whole;
and the answers themselves, without one."""

import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from app.chat.offer.tool_discovery import FIND_TOOLS, FindingTools, offer_found
from app.openai.result_format import RenderOptions
from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import Call, FakeUpstream, Turn, last_tool_results

WEATHER = [{"role": "user", "content": "How is the weather in Oslo?"}]
FOUND_WEATHER = {"basic__get_weather", "other__get_weather", "third__get_weather"}


def names(tools: Sequence[dict[str, Any]] | None) -> list[str]:
    return [t["function"]["name"] for t in tools or []]


def offered(upstream: FakeUpstream, request: int) -> list[str]:
    return names(upstream.chat_requests()[request].get("tools"))


@pytest.fixture(scope="module")
def finding(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    # Three copies of the basic server: 36 MCP tools, four of which the budget would offer.
    servers = {name: stdio_entry("basic.py") for name in ("basic", "other", "third")}
    with running_gateway(tmp_path_factory.mktemp("finding"), servers, ready=tuple(servers),
                         upstream_url=f"{upstream.url}/v1", tool_budget=4, tool_discovery="find_tools",
                         max_tool_rounds=4) as gateway:
        yield gateway


def ask(gateway: Gateway, messages: list[dict[str, Any]], stream: bool, **options: Any) -> tuple[str, str]:
    """The answer's content and its reasoning (where the trace is), streamed or whole."""
    client = gateway.client()
    if not stream:
        message = client.chat.completions.create(model="m", messages=messages, **options).choices[0].message  # type: ignore[call-overload]
        return message.content or "", (message.model_extra or {}).get("reasoning_content", "")
    chunks = list(client.chat.completions.create(model="m", messages=messages, stream=True, **options))  # type: ignore[call-overload]
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    return ("".join(d.content or "" for d in deltas),
            "".join((d.model_extra or {}).get("reasoning_content", "") for d in deltas))


@pytest.mark.parametrize("stream", [False, True])
def test_the_model_finds_the_tools_then_calls_one_that_answers(
    finding: Gateway, upstream: FakeUpstream, stream: bool
) -> None:
    upstream.script(Turn(calls=[Call(FIND_TOOLS, {"need": "weather in a city"})]),
                    Turn(calls=[Call("other__get_weather", {"city": "Oslo"})]), Turn(content="Sunny."))
    with capture_logs() as logs:
        content, reasoning = ask(finding, WEATHER, stream)
    assert content == "Sunny."
    first, second, third = upstream.chat_requests()
    # First: find_tools alone, in place of the 36 MCP tools, naming how many of which servers it searches.
    assert offered(upstream, 0) == [FIND_TOOLS]
    description = first["tools"][0]["function"]["description"]
    assert "among 36 tools of these servers: basic, other, third." in description
    # Its answer: the tools that match, by name and one line; and from then on their definitions.
    [answer] = last_tool_results(second).values()
    found = json.loads(answer)["data"]["tools"]
    assert set(found) == FOUND_WEATHER
    assert set(found.values()) == {"A dotted tool name, as MCP allows and OpenAI does not."}
    assert set(offered(upstream, 1)) == FOUND_WEATHER | {FIND_TOOLS} and offered(upstream, 1)[-1] == FIND_TOOLS
    definition = next(t for t in second["tools"] if t["function"]["name"] == "other__get_weather")
    assert "city" in definition["function"]["parameters"]["properties"]
    # The found tool's call reached its server, and its answer came back.
    assert "sunny in Oslo" in next(iter(last_tool_results(third).values()))
    assert offered(upstream, 2) == offered(upstream, 1)
    assert 'Calling find_tools({"need": "weather in a city"})' in reasoning
    assert 'Calling other__get_weather({"city": "Oslo"})' in reasoning
    [line] = [e for e in logs if e["event"] == "find_tools_offered"]
    assert line["behind"] == 36 and line["offered"] == []
    if not stream:  # a streamed answer's request line is written after the client has read its end
        [request] = [e for e in logs if e["event"] == "request" and e["path"] == "/v1/chat/completions"]
        assert (request["tools_offered"], request["tools_withheld"]) == (1, 36)


def test_a_tool_not_found_yet_is_unknown_even_beside_the_find_that_finds_it(
    finding: Gateway, upstream: FakeUpstream
) -> None:
    upstream.script(Turn(calls=[Call("basic__echo", {"text": "hi"})]),
                    Turn(calls=[Call(FIND_TOOLS, {"need": "echo text"}), Call("basic__echo", {"text": "hi"})]),
                    Turn(calls=[Call("basic__echo", {"text": "hi"})]), Turn(content="done"))
    content, _ = ask(finding, [{"role": "user", "content": "Say hi back to me."}], stream=False)
    assert content == "done"
    requests = upstream.chat_requests()
    assert "There is no tool named 'basic__echo'" in next(iter(last_tool_results(requests[1]).values()))
    unknown, found = sorted(last_tool_results(requests[2]).values(), key=lambda result: "no tool named" in result)[::-1]
    assert "There is no tool named 'basic__echo'" in unknown and "basic__echo" in json.loads(found)["data"]["tools"]
    assert "basic__echo" in offered(upstream, 2)
    assert "echo: hi" in next(iter(last_tool_results(requests[3]).values()))


def test_a_later_turn_keeps_the_tool_found_and_called_before(finding: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(calls=[Call(FIND_TOOLS, {"need": "weather"})]),
                    Turn(calls=[Call("third__get_weather", {"city": "Tromsø"})]), Turn(content="Sunny in Tromsø."))
    question = [{"role": "user", "content": "Is it sunny in Tromsø today?"}]  # a conversation of its own in memory
    content, _ = ask(finding, question, stream=False)
    upstream.script(Turn(content="Also sunny."))
    later = [*question, {"role": "assistant", "content": content}, {"role": "user", "content": "And in Bergen?"}]
    ask(finding, later, stream=False)
    [request] = upstream.chat_requests()
    assert offered(upstream, 0) == ["third__get_weather", FIND_TOOLS]  # called before: kept, as the budget keeps it
    called = [c["function"]["name"] for m in request["messages"] for c in m.get("tool_calls") or []]
    assert called == [FIND_TOOLS, "third__get_weather"]  # memory gave the turn its calls back


def test_nothing_withheld_and_a_clients_find_tools_leave_the_request_as_it_was(
    finding: Gateway, upstream: FakeUpstream
) -> None:
    upstream.script(Turn(content="ok"))
    finding.client(default_headers={"X-Toolbridge-Tools": "basic__echo,basic__add"}).chat.completions.create(
        model="m", messages=WEATHER)
    assert offered(upstream, 0) == ["basic__echo", "basic__add"]
    theirs = {"type": "function", "function": {"name": FIND_TOOLS, "description": "The client's own.",
                                               "parameters": {"type": "object", "properties": {}}}}
    upstream.script(Turn(calls=[Call(FIND_TOOLS, {})]))
    with capture_logs() as logs:
        answer = finding.client().chat.completions.create(model="m", messages=WEATHER, tools=[theirs])
    tools = upstream.chat_requests()[0]["tools"]
    assert tools[0] == theirs and names(tools).count(FIND_TOOLS) == 1 and len(tools) == 5  # the budget's four
    assert answer.choices[0].message.tool_calls[0].function.name == FIND_TOOLS  # back to the client
    assert [e["why"] for e in logs if e["event"] == "find_tools_not_offered"] == [
        "a tool of the client is called find_tools and keeps its name"]


def test_off_changes_nothing(tmp_path: Path, upstream: FakeUpstream) -> None:
    with running_gateway(tmp_path, {"basic": stdio_entry("basic.py")}, ready=["basic"],
                         upstream_url=f"{upstream.url}/v1", tool_budget=4) as gateway:
        upstream.script(Turn(content="ok"))
        gateway.client().chat.completions.create(model="m", messages=WEATHER)
    assert len(offered(upstream, 0)) == 4 and FIND_TOOLS not in offered(upstream, 0)
    assert "basic__get_weather" in offered(upstream, 0)


SERVERS_OWN = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("finder")


@server.tool()
def find_tools(need: str) -> str:
    """The server's own search of its documents."""
    return f"the server looked for {need}"


def note(text: str) -> str:
    return text


for n in range(5):
    server.add_tool(note, name=f"note_{n}", description=f"Keeps note number {n}.")

server.run()
'''


def test_a_servers_find_tools_keeps_its_name_and_the_gateways_is_not_offered(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    script = tmp_path / "finder.py"
    script.write_text(SERVERS_OWN)
    servers = {"finder": {"command": sys.executable, "args": [str(script)]}}
    with running_gateway(tmp_path, servers, ready=["finder"], upstream_url=f"{upstream.url}/v1", tool_budget=2,
                         tool_prefix="on-conflict", tool_discovery="find_tools") as gateway:
        upstream.script(Turn(calls=[Call(FIND_TOOLS, {"need": "invoices"})]), Turn(content="ok"))
        with capture_logs() as logs:
            gateway.client().chat.completions.create(
                model="m", messages=[{"role": "user", "content": "Use find_tools to look for invoices."}])
    first, second = upstream.chat_requests()
    [theirs] = [t for t in first["tools"] if t["function"]["name"] == FIND_TOOLS]
    assert theirs["function"]["description"] == "The server's own search of its documents." and len(first["tools"]) == 2
    assert next(iter(last_tool_results(second).values())).count("the server looked for invoices") == 1
    assert [e["why"] for e in logs if e["event"] == "find_tools_not_offered"] == [
        "a tool of finder is called find_tools and keeps its name"]


# The answers themselves, on a catalogue of plain data.

def tool(name: str, description: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description,
                                             "parameters": {"type": "object", "properties": {}}}}


CATALOGUE = [tool(f"s{n % 3}__{word}_{n}", f"Works with {word} things.\nMore lines.")
             for n, word in enumerate(["weather", "email", "file", "calendar", "search", "order", "sql", "map"] * 2)]


class Catalogue:
    """A `RequestTools` of plain data: what `only` kept, what was called."""

    def __init__(self, tools: list[dict[str, Any]]) -> None:
        self.openai_tools = tools
        self.calls: list[str] = []
        self.memo: dict[str, object] = {}

    async def call_tool(self, name: str, arguments: str, on_progress: Any = None, answers: Any = None) -> Any:
        self.calls.append(name)
        return name

    def only(self, names: frozenset[str], order: Sequence[str] = ()) -> "Catalogue":
        narrowed = Catalogue([t for t in self.openai_tools if t["function"]["name"] in names])
        narrowed.calls = self.calls
        return narrowed

    def asks_first(self, name: str) -> bool:
        return False

    def definition_change(self, name: str) -> str | None:
        return None

    def server_of(self, name: str) -> str | None:
        return name.split("__")[0] if any(t["function"]["name"] == name for t in self.openai_tools) else None

    def servers(self) -> dict[str, str]:
        return {name: server for tool in self.openai_tools
                if (server := self.server_of(name := tool["function"]["name"])) is not None}


@pytest.mark.parametrize(("arguments", "found"), [
    ('{"need": "the weather"}', ["s0__weather_0", "s2__weather_8"]),
    ('{"query": "send an email"}', ["s1__email_1", "s0__email_9"]),  # small models rename the argument
    ('{"need": "the sql tool"}', ["s0__sql_6", "s2__sql_14"]),
])
def test_a_find_answers_with_the_best_few_by_one_line_and_offers_them_next(arguments: str, found: list[str]) -> None:
    catalogue = Catalogue(CATALOGUE)
    finding = FindingTools(catalogue, ["s1__map_7"], RenderOptions())
    answer = finding.find(arguments)
    assert not answer.is_error and list(json.loads(answer.content)["data"]["tools"]) == found
    assert set(json.loads(answer.content)["data"]["tools"].values()) <= {f"Works with {w} things." for w in
                                                                        ("weather", "email", "sql")}
    request = {"tools": [tool("clients_own", "Mine."), *finding.openai_tools]}
    assert names(request["tools"]) == ["clients_own", "s1__map_7", FIND_TOOLS]
    offered_names = {"clients_own", "s1__map_7", FIND_TOOLS}
    answered = {(found[0], "{}"), ("clients_own", "{}")}  # a call of a found tool before it was offered is no repeat
    offer_found(request, offered_names, answered, finding)
    assert names(request["tools"]) == ["clients_own", *found, "s1__map_7", FIND_TOOLS]
    assert offered_names == {"clients_own", "s1__map_7", FIND_TOOLS, *found} and answered == {("clients_own", "{}")}
    offer_found(request, offered_names, answered, finding)  # nothing new: as it was
    assert names(request["tools"]) == ["clients_own", *found, "s1__map_7", FIND_TOOLS]


@pytest.mark.parametrize(("arguments", "error"), [
    ("{}", 'find_tools takes {"need": "..."}'), ("not json", 'find_tools takes {"need": "..."}'),
    ('{"need": "bake a cake"}', "No tool matches 'bake a cake': try other words."),
])
def test_a_find_without_a_need_or_a_match_is_an_error_the_model_can_act_on(arguments: str, error: str) -> None:
    finding = FindingTools(Catalogue(CATALOGUE), [], RenderOptions(result_format="text"))
    answer = finding.find(arguments)
    assert answer.is_error and answer.content.startswith(f"Error: {error}") and not answer.retryable
    assert finding.offer_found() == []


@pytest.mark.anyio
async def test_only_what_is_offered_can_be_called_and_a_find_is_answered_by_the_gateway() -> None:
    catalogue = Catalogue(CATALOGUE)
    finding = FindingTools(catalogue, ["s1__map_7"], RenderOptions())
    await finding.call_tool(FIND_TOOLS, '{"need": "weather"}')
    assert catalogue.calls == []  # the gateway's own answer
    assert finding.server_of("s0__weather_0") is None  # found, but not yet offered
    assert finding.offer_found() == ["s0__weather_0", "s2__weather_8"]
    assert finding.server_of("s0__weather_0") == "s0"
    assert await finding.call_tool("s0__weather_0", "{}") == "s0__weather_0" and catalogue.calls == ["s0__weather_0"]
