"""The tool budget's ranking data (app/chat/offer/tool_ranking.py): worked out once per catalogue, off the event loop,
reused by the catalogue's parts and by every request, and the choices the same as from the tools as they are."""

import asyncio
import json
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.types import Tool as McpTool

from app.chat.offer import tool_ranking
from app.chat.offer.context_budget import wire_chars
from app.chat.offer.tool_budget import Budget, budget_for, choose_within
from app.chat.offer.tool_ranking import kept_ranking, list_chars, prepare_ranking, ranking_of, tool_facts
from app.mcp.convert import Catalogue, ConversionOptions, build_catalogue
from bench.eval.tasks import client_tools, load_tasks
from bench.scale_catalogue import mcp_tools
from tests.conftest import running_gateway
from tests.support.fake_upstream import FakeUpstream, Turn

CATALOGUE = Path(__file__).parents[3] / "bench" / "eval" / "catalogue"
MANY_TOOLS = Path(__file__).parents[3] / "bench" / "many_tools_server.py"
OPEN_WEBUI = client_tools("open_webui")
ASKED = ["What do you remember about Alice?", "Open example.com in the browser", "Scale the web deployment to 5",
         "Find open issues about login errors", "How many orders did we get last week?"]


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def catalogue_of(servers: int, tools_each: int) -> Catalogue:
    """Servers of the recorded popular tools, as the gateway converts them."""
    return build_catalogue({f"s{n}": [McpTool.model_validate({**tool, "outputSchema": None})
                                      for tool in mcp_tools(tools_each, n * tools_each)] for n in range(servers)})


@pytest.fixture
def worked_out(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """How many tools' facts and how many indexes are worked out, and how many of them where an event loop runs
    ("on the loop")."""
    counts: Counter[str] = Counter()
    facts, index = tool_ranking.tool_facts, tool_ranking._build_index

    def counted(kind: str, work: Any) -> Any:
        def counting(*args: Any) -> Any:
            counts[kind] += 1
            if asyncio._get_running_loop() is not None:
                counts[f"{kind} on the loop"] += 1
            return work(*args)
        return counting

    monkeypatch.setattr(tool_ranking, "tool_facts", counted("facts", facts))
    monkeypatch.setattr(tool_ranking, "_build_index", counted("indexes", index))
    yield counts


def test_a_catalogues_data_is_worked_out_once_and_every_request_only_ranks(worked_out: Counter[str]) -> None:
    catalogue = catalogue_of(10, 20)
    assert kept_ranking(catalogue) is None
    prepare_ranking(catalogue)
    assert worked_out == {"facts": 200, "indexes": 1}
    budget = budget_for(24, 8192, False, 4)
    for text in ASKED:
        kept = kept_ranking(catalogue)
        assert kept is not None and choose_within(kept, [], user(text), budget) is not None
    assert worked_out == {"facts": 200, "indexes": 1}
    rebuilt = catalogue_of(10, 20)  # a tool list changed: the new catalogue's data is its own
    assert kept_ranking(rebuilt) is None
    prepare_ranking(rebuilt)
    assert worked_out == {"facts": 400, "indexes": 2}


def test_a_part_of_a_catalogue_reuses_its_tools_facts_and_gets_its_own_index_once(worked_out: Counter[str]) -> None:
    catalogue = catalogue_of(4, 20)
    prepare_ranking(catalogue)
    for _ in range(3):  # a toolset's requests: a new part each time, the same tools
        part = catalogue.select(lambda _, route: route.server in {"s1", "s2"})
        assert len(ranking_of(part).names) == 40
    taken = catalogue.openai_tools[0]["function"]["name"]
    for _ in range(2):  # a client's tool of the name of one of ours, which each of its requests renames
        ranking_of(catalogue.clear_of(frozenset({taken})))
    assert worked_out == {"facts": 80 + 1, "indexes": 3}  # the renamed tool; the whole, the toolset, the renamed


def test_a_clients_tools_ranked_with_ours_are_indexed_once_per_set_of_their_words(worked_out: Counter[str]) -> None:
    catalogue = catalogue_of(3, 20)
    prepare_ranking(catalogue)
    budget = budget_for(24, 8192, True, 4)  # TOOLBRIDGE_RANK_CLIENT_TOOLS
    for text in ASKED:
        choose_within(ranking_of(catalogue), OPEN_WEBUI, user(text), budget)
    choose_within(ranking_of(catalogue), OPEN_WEBUI[:3], user(ASKED[0]), budget)
    assert worked_out["indexes"] == 1 + 2  # Open WebUI's 36 once, their first three once
    assert worked_out["facts"] == 60 + (len(ASKED) * 36 + 3)  # a client's tools are weighed with each request


@pytest.mark.parametrize("rank_client_tools", [False, True])
def test_the_choices_from_kept_data_are_those_from_the_tools_as_they_are(rank_client_tools: bool) -> None:
    """Every task of the eval's scale category, with and without a client's tools, the budget's orders, and the
    list of a part and of the whole: the same choice, score for score."""
    listed = [json.loads(path.read_text()) for path in sorted(CATALOGUE.glob("*.json")) if path.stem != "results"]
    catalogue = build_catalogue({entry["server"]: [McpTool.model_validate(tool) for tool in entry["tools"]]
                                 for entry in listed}, ConversionOptions(prefix="on-conflict"))
    parts = [catalogue, catalogue.select(lambda name, route: route.server != "github")]
    tasks = [task for task in load_tasks() if task.servers == "catalogue"][:12]
    turns = [[{"role": "user", "content": turn} for turn in task.turns] for task in tasks]
    for part in parts:
        tools, servers = list(part.openai_tools), part.servers()
        for number, messages in enumerate(turns):
            budget = budget_for(24, (None, 2048, 8192)[number % 3], rank_client_tools, 4,
                                relevance_order=number % 2 == 0)
            for client in ([], OPEN_WEBUI):
                as_they_are = choose_within(tools, client, messages, budget, servers=servers)
                assert choose_within(ranking_of(part), client, messages, budget) == as_they_are
                shown = choose_within(tools, client, messages, budget, servers=servers, always_rank=True)
                assert choose_within(ranking_of(part), client, messages, budget, always_rank=True) == shown


def test_sizes_from_the_facts_are_the_lists_on_the_wire() -> None:
    tools = [{"type": "function", "function": {"name": "plain", "description": "Zeit für Café ☕"}},
             {"type": "function", "function": {"name": "huge", "parameters": {"type": "object", "properties": {
                 "n": {"type": "integer", "maximum": 2**70}}}}},  # orjson refuses it: the standard library writes it
             {"type": "function", "function": {"name": "float", "parameters": {"minimum": 1e16}}}]
    for chosen in ([], tools[:1], [tools[0], tools[2]], tools, tools[1:]):
        assert list_chars([tool_facts(tool, None, ()) for tool in chosen]) == (wire_chars(chosen) if chosen else 0)


def test_a_list_held_whole_within_the_budget_is_never_worked_out(worked_out: Counter[str]) -> None:
    tools = list(catalogue_of(1, 8).openai_tools)
    assert choose_within(tools, [], user(ASKED[0]), Budget(8, 1 << 40)) is None
    assert worked_out == {}


def test_a_gateways_ranking_data_is_worked_out_off_the_event_loop_once_per_tool_list_not_per_request(
    tmp_path: Path, upstream: FakeUpstream, worked_out: Counter[str],
) -> None:
    servers = {name: {"command": sys.executable, "args": [str(MANY_TOOLS), "--count", "30", "--offset", str(offset)]}
               for name, offset in (("a", 0), ("b", 30))}
    with running_gateway(tmp_path, servers, ready=tuple(servers), upstream_url=f"{upstream.url}/v1",
                         tool_budget=8) as gateway:
        client = gateway.client()
        start = worked_out.copy()
        assert start["facts"] >= 60 and start["indexes"] >= 1  # with the catalogues, as the servers came
        for text in ASKED:
            upstream.script(Turn(content="ok"))
            client.chat.completions.create(model="m", messages=user(text))  # type: ignore[arg-type]
            assert len(upstream.chat_requests()[0]["tools"]) == 8  # ranked (a model of no known context)
        assert worked_out == start  # no request worked anything out
        toolset = gateway.client(default_headers={"X-Toolbridge-Tools": "a"})
        for text in ASKED:  # a part of the catalogue: its index once, by the first of its requests
            upstream.script(Turn(content="ok"))
            toolset.chat.completions.create(model="m", messages=user(text))  # type: ignore[arg-type]
        assert worked_out == start + Counter(indexes=1)
    assert worked_out["facts on the loop"] == worked_out["indexes on the loop"] == 0


def test_a_catalogue_within_the_budget_is_worked_out_only_when_a_request_must_rank(
    tmp_path: Path, upstream: FakeUpstream, worked_out: Counter[str],
) -> None:
    """Its chats that fit work nothing out and import no bm25s (12 MB of an idle gateway's memory, issue 47); the
    first one that must rank (here, a context its tools outgrow) works its data out, off the event loop, once."""
    servers = {"a": {"command": sys.executable, "args": [str(MANY_TOOLS), "--count", "10"]}}
    with running_gateway(tmp_path, servers, ready=("a",), upstream_url=f"{upstream.url}/v1", tool_budget=24) as gateway:
        client = gateway.client()
        for _ in range(2):
            upstream.script(Turn(content="ok"))
            client.chat.completions.create(model="m", messages=user(ASKED[0]))  # type: ignore[arg-type]
            assert len(upstream.chat_requests()[0]["tools"]) == 10  # a model of no known context: all fit
        assert worked_out == {}
    with running_gateway(tmp_path, servers, ready=("a",), upstream_url=f"{upstream.url}/v1", tool_budget=24,
                         context_tokens=2048) as gateway:  # the 10 tools' definitions outgrow half of it
        client = gateway.client()
        for _ in range(2):
            upstream.script(Turn(content="ok"))
            client.chat.completions.create(model="m", messages=user(ASKED[0]))  # type: ignore[arg-type]
            assert len(upstream.chat_requests()[0]["tools"]) < 10
    assert worked_out["facts"] == 10 and worked_out["indexes"] == 1
    assert worked_out["facts on the loop"] == worked_out["indexes on the loop"] == 0
