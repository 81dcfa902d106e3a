"""Issue 33 in Open WebUI itself (opt-in, see tests/support/open_webui.py): twelve popular MCP servers mounted at
once, beside Open WebUI's own 36 tools, with an upstream that reports an 8k context as LM Studio does. "What do you
remember about Alice?" is offered the memory server's search tool among ours, within the budget; the scripted
model calls it, answers from its result, and the next turn in the same chat has the call and its result back.

Open WebUI -> the gateway (keys set, the default trace and tool budget) -> the eval's twelve recorded servers
(bench/eval/catalogue_server.py NAME over stdio, canned results from bench/eval/catalogue/results.json) and a
scripted upstream. Screenshot: test-artifacts/open_webui_many_tools.png.
"""

import json
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.chat.offer.compact_tools import compact_tool
from app.chat.offer.context_budget import wire_chars
from app.chat.offer.tool_budget import budget_for
from app.openai.schemas import content_text
from app.settings import TOOL_BUDGET_DEFAULT
from bench.eval.runner import CATALOGUE, CATALOGUE_SERVER
from bench.eval.tasks import client_tools
from tests.conftest import Gateway
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn
from tests.support.open_webui import (
    chat_page,
    keyed_gateway,
    offered_name,
    person_asked,
    running_open_webui,
    send,
    skip_without_open_webui,
    tool_result,
)

KEY = "sk-owui-key"
WAIT = 60_000  # ms: Open WebUI and the model on two busy cores
ASK = "What do you remember about Alice?"
FOLLOW_UP = "Where does she live?"
CONTEXT_TOKENS = 8192  # what the fake LM Studio reports its loaded model's context to be
OPEN_WEBUI = {tool["function"]["name"]: tool for tool in client_tools("open_webui")}
# The memory server's tools that answer "what do you remember": the ones a relevance order puts first.
RECALL = {"memory__search_nodes", "memory__open_nodes", "memory__read_graph"}
# Alice's facts in the canned search_nodes result; the answer names them only when the result did.
FACTS = ("Acme", "product designer", "Lisbon", "peanuts")
ANSWER = "Alice works at Acme as a product designer, lives in Lisbon and is allergic to peanuts."
skip_without_open_webui()


def scripted(body: dict[str, Any]) -> Turn:
    """The model: searches the memory server for Alice when its tool is offered, answers from what it found;
    the follow-up is answered from the earlier result in the history."""
    person = person_asked(body)
    if person is None:  # Open WebUI's titles, tags and follow-ups
        return Turn(content="{}")
    if person.text == FOLLOW_UP:
        earlier = [tool_result(m.get("content")) for m in body["messages"] if m["role"] == "tool"]
        found = any("Lisbon" in result for result in earlier)
        return Turn(content="Memory said she lives in Lisbon." if found else "I do not know where she lives.")
    if person.results:
        found = all(fact in person.results[-1] for fact in FACTS)
        return Turn(content=ANSWER if found else "Memory knows nothing about Alice.")
    tool = offered_name(body, "search_nodes", "memory")
    if tool is None:
        return Turn(content="I have no memory tool.")
    return Turn(calls=[Call(tool, {"query": "Alice"})])


@pytest.fixture(scope="module")
def model() -> FakeUpstream:
    return FakeUpstream(default=scripted)  # it answers /api/v1/models with a loaded context of 8,192 tokens


@pytest.fixture(scope="module")
def gateway(model: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    servers = {name: {"command": sys.executable, "args": [str(CATALOGUE_SERVER), name]} for name in CATALOGUE}
    with keyed_gateway(model, tmp_path_factory.mktemp("owui-gateway"), servers, KEY,
                       tool_budget=TOOL_BUDGET_DEFAULT) as gateway:  # the tests' settings offer every tool
        yield gateway


@pytest.fixture(scope="module")
def open_webui(gateway: Gateway, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_open_webui(f"{gateway.url}/v1", KEY, MODEL, tmp_path_factory.mktemp("owui-data")) as url:
        yield url


def _asked(model: FakeUpstream, text: str) -> list[dict[str, Any]]:
    """The upstream requests whose person's last message was `text` (Open WebUI's background tasks left out)."""
    return [body for body in model.chat_requests() if (person := person_asked(body)) and person.text == text]


def _listed(gateway: Gateway) -> list[dict[str, Any]]:
    """`GET /tools?q=`: every MCP tool as a user who asked ASK would be offered it, the offered first."""
    listed = httpx.get(f"{gateway.url}/tools", params={"q": ASK}, headers={"Authorization": f"Bearer {KEY}"})
    assert listed.status_code == 200, listed.text
    data: list[dict[str, Any]] = listed.json()["data"]
    return data


def _check_the_offer(first: dict[str, Any], gateway: Gateway) -> None:
    """The first request's tools: Open WebUI's 36, compacted, then ours, the most relevant in the configured order,
    within the budget."""
    names = [tool["function"]["name"] for tool in first["tools"]]
    ours = [name for name in names if name.split("__")[0] in CATALOGUE]
    theirs = [tool for tool in first["tools"] if tool["function"]["name"] not in ours]
    assert len(theirs) == 36 and names[36:] == ours  # Open WebUI's own, never dropped, and ours after them
    assert all(compact_tool(tool) == tool for tool in theirs)  # first sentences, no parameter descriptions
    shared = [tool for tool in theirs if tool["function"]["name"] in OPEN_WEBUI]  # in the eval's recorded list
    assert shared and wire_chars(shared) < wire_chars([OPEN_WEBUI[tool["function"]["name"]] for tool in shared])
    tools = gateway.settings.tools
    budget = budget_for(tools.tool_budget, CONTEXT_TOKENS, tools.rank_client_tools, tools.min_mcp_tools)
    assert 0 < len(ours) <= budget.max_tools
    # Past the floor, what is kept fits the context's share beside Open WebUI's compacted tools.
    assert len(ours) <= budget.min_mcp_tools or wire_chars(first["tools"]) <= budget.max_chars
    # The best of all 155 as /tools scores them for the question, in mcp.json's order, the memory search among them.
    listed = _listed(gateway)
    ranked = [entry["function"]["name"] for entry in sorted(listed, key=lambda entry: -entry["score"])]
    configured = [entry["function"]["name"] for entry in httpx.get(
        f"{gateway.url}/tools", headers={"Authorization": f"Bearer {KEY}"}).json()["data"]]
    assert set(ours) == set(ranked[: len(ours)]) and "memory__search_nodes" in ours
    assert ours == [name for name in configured if name in ours]
    # The status page says what was left out, and that Open WebUI's tools went compact.
    recent = httpx.get(f"{gateway.url}/ui/requests", headers={"Authorization": f"Bearer {KEY}"}).json()["data"]
    [entry] = [entry for entry in recent if entry["tools_withheld"]]
    assert entry["tools_offered"] == len(names) and entry["tools_withheld"] == len(ranked) - len(ours)
    assert "the client's tools were sent compact" in entry["why"]


def test_twelve_servers_offer_open_webui_the_memory_search_first_and_the_next_turn_has_its_result(
    open_webui: str, gateway: Gateway, model: FakeUpstream
) -> None:
    from playwright.sync_api import expect

    with chat_page(open_webui, "open_webui_many_tools.png") as tab:
        send(tab, ASK)
        expect(tab.get_by_text(ANSWER)).to_be_visible(timeout=WAIT)
        first, answered = _asked(model, ASK)  # the call, then the answer from its result
        _check_the_offer(first, gateway)
        [call] = answered["messages"][-2]["tool_calls"]
        assert call["function"]["name"] == "memory__search_nodes"
        assert json.loads(call["function"]["arguments"]) == {"query": "Alice"}
        tab.get_by_text("Thought for").first.click()  # the default trace, in the reasoning Open WebUI folds away
        expect(tab.get_by_text('Calling memory__search_nodes({"query": "Alice"})')).to_be_visible()
        expect(tab.get_by_text("memory__search_nodes ok in")).to_be_visible()
        send(tab, FOLLOW_UP)
        expect(tab.get_by_text("Memory said she lives in Lisbon.")).to_be_visible(timeout=WAIT)
        [second] = _asked(model, FOLLOW_UP)
        assert [m["role"] for m in second["messages"]][-5:] == ["user", "assistant", "tool", "assistant", "user"]
        assert "Lisbon" in content_text(second["messages"][-3]["content"])
        assert offered_name(second, "search_nodes", "memory") is not None  # called before: kept on


def test_get_tools_with_the_question_lists_the_offered_tools_first_in_order(gateway: Gateway) -> None:
    data = _listed(gateway)
    offered = [entry for entry in data if entry["offered"]]
    assert len(data) > len(offered) > 0  # twelve servers' tools: the budget leaves some out
    assert data[: len(offered)] == offered  # the offered first, as a request would send them
    assert [entry["position"] for entry in offered] == list(range(1, len(offered) + 1))
    assert not any("position" in entry for entry in data[len(offered):])
    withheld = [entry["score"] for entry in data[len(offered):]]
    assert withheld == sorted(withheld, reverse=True)  # then the withheld, best first
    best = max(data, key=lambda entry: entry["score"])
    assert best["function"]["name"] in RECALL and best["server"] == "memory" and best["offered"]
    assert "memory__search_nodes" in {entry["function"]["name"] for entry in offered}
