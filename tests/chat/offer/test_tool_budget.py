"""The tool budget (app/chat/tool_budget.py): tables of what a long tool list is cut to, and the same through
the gateway with real servers, the request log, `/tools?q=` and a client tool left out."""

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.types import Tool
from structlog.testing import capture_logs

from app.chat.loop_options import tool_budget_for
from app.chat.offer.tool_budget import Budget, budget_for, choose_in_conversation, choose_within
from app.chat.offer.tool_offer import why_withheld
from app.mcp.convert import ConversionOptions, build_catalogue
from app.settings import Settings
from bench.eval.tasks import load_tasks
from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn

TOPICS = ["weather forecast city", "order lookup customer", "file read path", "web search query",
          "calendar event date", "email message send", "database sql query"]


def tool(name: str, description: str, *parameters: str) -> dict[str, Any]:
    properties = {parameter: {"type": "string"} for parameter in parameters}
    return {"type": "function", "function": {"name": name, "description": description,
                                             "parameters": {"type": "object", "properties": properties}}}


# 70 MCP tools: ten of each topic, over ten servers.
SEVENTY = [tool(f"s{n}__{topic.split()[0]}_{n}", f"Works with {topic} things.", topic.split()[-1])
           for topic in TOPICS for n in range(10)]
USER = [{"role": "user", "content": "What is the weather forecast for Oslo?"}]
ROOMY = 1 << 40


def names(tools: list[dict[str, Any]]) -> list[str]:
    return [t["function"]["name"] for t in tools]


def test_a_list_within_the_budget_is_left_alone() -> None:
    assert choose_within(SEVENTY[:8], [], USER, Budget(8, ROOMY)) is None


def test_seventy_tools_are_cut_to_the_budget_keeping_the_most_relevant() -> None:
    choice = choose_within(SEVENTY, [], USER, Budget(10, ROOMY))
    assert choice is not None and len(choice.kept) == 10 and len(choice.withheld) == 60
    assert all(name.split("__")[1].startswith("weather") for name in choice.kept)
    assert choice.scores["s0__weather_0"] > 0 == choice.scores["s0__email_0"]


def test_the_kept_tools_are_offered_most_relevant_first_and_a_named_one_before_them() -> None:
    question = [{"role": "user", "content": "The weather forecast for Oslo, and the email_3 tool too."}]
    choice = choose_within(SEVENTY, [], question, Budget(5, ROOMY, relevance_order=True))
    assert choice is not None and choice.order[0] == "s3__email_3" and set(choice.order) == choice.kept
    scores = [choice.scores[name] for name in choice.order[1:]]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0
    assert choose_within(SEVENTY[:5], [], question, Budget(5, ROOMY)) is None  # all fit: as configured, every turn
    shown = choose_within(SEVENTY[:5], [], question, Budget(5, ROOMY), always_rank=True)  # what /tools?q= shows
    assert shown is not None and shown.order == () and shown.kept == set(names(SEVENTY[:5]))  # all, matched or not
    configured = choose_within(SEVENTY, [], question, Budget(5, ROOMY))  # TOOL_ORDER=configured, the default
    assert configured is not None and configured.kept == choice.kept and configured.order == ()


CATALOGUE = Path(__file__).parents[3] / "bench" / "eval" / "catalogue"


@pytest.fixture(scope="module")
def recorded() -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Popular servers' tools as they list them (bench/eval/catalogue/), converted as the gateway does."""
    servers = ("memory", "playwright", "kubernetes", "postgres", "notion", "github", "time")
    listed = {server: json.loads((CATALOGUE / f"{server}.json").read_text())["tools"] for server in servers}
    by_server = {server: [Tool.model_validate(tool) for tool in tools] for server, tools in listed.items()}
    catalogue = build_catalogue(by_server, ConversionOptions(prefix="on-conflict"))
    return list(catalogue.openai_tools), {name: route.server for name, route in catalogue.routes.items()}


@pytest.mark.parametrize(("request_text", "first"), [
    ("What do you remember about Alice?", {"search_nodes", "open_nodes", "read_graph"}),  # the server's words
    ("Open example.com in the browser", {"browser_navigate"}),  # a synonym, an address, the name's words
    ("Show me the logs of the api pod", {"kubectl_logs"}),  # the name split: kubectl_logs
    ("Which tables does the shop database have?", {"query"}),  # postgres is a database
    ("Show the latest commits of acme/shop", {"list_commits"}),  # stems: commits, commit
    ("What time is it in Tokyo?", {"get_current_time", "convert_time"}),
])
def test_everyday_words_find_a_popular_servers_tool_first(
    recorded: tuple[list[dict[str, Any]], dict[str, str]], request_text: str, first: set[str]
) -> None:
    tools, servers = recorded
    asked = [{"role": "user", "content": request_text}]
    choice = choose_within(tools, [], asked, Budget(24, ROOMY, relevance_order=True), servers=servers)
    assert choice is not None and choice.order[0] in first, choice.order[:5]


@pytest.fixture(scope="module")
def twelve_servers() -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The eval's category at scale: twelve popular servers' 155 tools, as the gateway converts them."""
    listed = [json.loads(path.read_text()) for path in sorted(CATALOGUE.glob("*.json")) if path.stem != "results"]
    by_server = {entry["server"]: [Tool.model_validate(tool) for tool in entry["tools"]] for entry in listed}
    catalogue = build_catalogue(by_server, ConversionOptions(prefix="on-conflict"))
    return list(catalogue.openai_tools), {name: route.server for name, route in catalogue.routes.items()}


def test_every_everyday_request_of_the_eval_at_scale_keeps_a_tool_it_needs(
    twelve_servers: tuple[list[dict[str, Any]], dict[str, str]],
) -> None:
    """The budget's recall (TOOLBRIDGE_TOOL_BUDGET=24 of 155 tools): each task's user turns, and the tools its first
    call may be. Before the words of tool_words.py, 46 of 56 kept one; now all of them do."""
    tools, servers = twelve_servers
    tasks = [task for task in load_tasks() if task.servers == "catalogue" and task.calls]
    assert len(tasks) >= 40
    missed = []
    for task in tasks:
        turns = [{"role": "user", "content": turn} for turn in task.turns]
        choice = choose_within(tools, [], turns, budget_for(24, None, False, 4), servers=servers)
        assert choice is not None and 0 < len(choice.kept) <= 24
        if not set(task.calls[0].names) & choice.kept:  # type: ignore[index]
            missed.append(task.id)
    assert missed == []


def test_tools_called_before_and_tools_the_user_names_are_always_kept() -> None:
    history = [{"role": "user", "content": "Send an email."},
               {"role": "assistant", "content": "", "tool_calls": [
                   {"id": "c1", "type": "function", "function": {"name": "s3__email_3", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "c1", "content": "sent"},
               {"role": "assistant", "content": "Sent."},
               {"role": "user", "content": "Now the weather forecast, and use database_7 too."}]
    choice = choose_within(SEVENTY, [], history, Budget(4, ROOMY))
    assert choice is not None
    assert {"s3__email_3", "s7__database_7"} <= choice.kept  # called before; named by the user
    assert len(choice.kept) == 4 and sum(name.split("__")[1].startswith("weather") for name in choice.kept) == 2


def _follow_up(first: str, second: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": first}, {"role": "assistant", "content": "Here it is."},
            {"role": "user", "content": second}]


# Three weather tools among sixty others: the follow-up's own words rank them in another order.
WEATHER = [tool("w__weather_now", "The current weather in a city: temperature and wind.", "city"),
           tool("w__weather_forecast", "The weather forecast for the coming days in a city.", "city", "days"),
           tool("w__weather_alerts", "Severe weather warnings for a region.", "region"), *SEVENTY[10:]]
NOW = "What is the weather in Oslo now?"


@pytest.mark.parametrize("second", ["And the forecast for the coming days?", "Thanks!"])
def test_a_follow_up_on_the_same_subject_is_offered_the_tools_before_it_in_their_order(second: str) -> None:
    """What the model server cached of the request before stays the start of this one: the same tools, in the
    same order, though the follow-up's own words would put the forecast first."""
    budget = Budget(3, ROOMY, relevance_order=True)
    before = choose_within(WEATHER, [], [{"role": "user", "content": NOW}], budget)
    alone = choose_within(WEATHER, [], _follow_up(NOW, second), budget)
    chosen = choose_in_conversation(WEATHER, [], _follow_up(NOW, second), budget)
    assert before is not None and alone is not None and chosen is not None
    assert (chosen.kept, chosen.order) == (before.kept, before.order)
    assert before.order[0] == "w__weather_now"
    if second != "Thanks!":
        assert alone.order[0] == "w__weather_forecast"


@pytest.mark.parametrize("second", ["Now send an email message to Kari.", "Use database_7 for it."])
def test_a_follow_up_on_another_subject_or_naming_a_tool_gets_the_tools_its_words_call_for(second: str) -> None:
    budget = Budget(3, ROOMY, relevance_order=True)
    chosen, alone = (choose(WEATHER, [], _follow_up(NOW, second), budget)
                     for choose in (choose_in_conversation, choose_within))
    assert chosen is not None and alone is not None and (chosen.kept, chosen.order) == (alone.kept, alone.order)
    assert {"s0__email_0", "s7__database_7"} & chosen.kept


def test_a_conversations_first_request_is_chosen_as_before() -> None:
    assert choose_in_conversation(SEVENTY, [], USER, Budget(10, ROOMY)) == choose_within(SEVENTY, [], USER,
                                                                                          Budget(10, ROOMY))


def test_the_eval_at_scale_follow_ups_keep_their_tools_where_they_can_and_each_is_offered_a_tool_it_needs(
    twelve_servers: tuple[list[dict[str, Any]], dict[str, str]],
) -> None:
    """The eval's follow-ups over the 155 tools at an 8k context: 4 of 9 second turns now start as the first did
    (1 of 9 chose the same tools by their words alone), and none loses the tool its task calls."""
    tasks = [task for task in load_tasks() if task.servers == "catalogue" and len(task.turns) > 1]
    tools, servers = twelve_servers
    budget = budget_for(24, 8192, False, 4)
    kept_as_before, missing = [], []
    for task in tasks:
        first = choose_within(tools, [], _follow_up(*task.turns[:2])[:1], budget, servers=servers)
        second = choose_in_conversation(tools, [], _follow_up(*task.turns[:2]), budget, servers=servers)
        assert first is not None and second is not None
        kept_as_before += [task.id] if second == first else []
        needed = {name for call in task.calls or [] for name in call.names}
        missing += [task.id] if needed and not needed & second.kept else []
    assert (len(tasks), missing) == (9, [])
    assert sorted(kept_as_before) == ["scale-follow-db", "scale-follow-gh-pr", "scale-follow-k8s", "scale-follow-time"]


def test_client_tools_are_never_dropped_but_count_in_the_contexts_share() -> None:
    client = [tool(f"owui_{n}", "Open WebUI's own tool. " + "x" * 500) for n in range(36)]
    size = len(json.dumps(client, separators=(",", ":")))
    budget = Budget(ROOMY, size + 400)  # room for the client's tools and about two of ours
    choice = choose_within(SEVENTY, client, USER, budget)
    assert choice is not None and choice.compacted_client_tools is None and choice.reasons == ("context",)
    assert {f"owui_{n}" for n in range(36)} <= choice.kept
    ours = choice.kept - {f"owui_{n}" for n in range(36)}
    assert 1 <= len(ours) <= 3 and all("weather" in name for name in ours)


def test_client_tools_that_fill_the_share_leave_the_most_relevant_of_ours_and_are_sent_compact() -> None:
    # Open WebUI's 36 tools in an 8k context once left no MCP tool at all.
    client = [tool(f"owui_{n}", "Open WebUI's own tool. " + "x" * 500, "text") for n in range(36)]
    budget = budget_for(24, 8192, False, min_mcp_tools=4)
    choice = choose_within(SEVENTY, client, USER, budget)
    assert choice is not None and choice.compacted_client_tools is not None
    assert [t["function"]["description"] for t in choice.compacted_client_tools] == ["Open WebUI's own tool."] * 36
    ours = choice.kept - {f"owui_{n}" for n in range(36)}
    # compact, they left room for every tool that matches; the 60 that match nothing are not offered
    assert ours == {f"s{n}__weather_{n}" for n in range(10)}
    assert why_withheld(choice, budget, client).startswith("matching none of the user's words")
    # Without the floor, the same request would get none of ours.
    bare = choose_within(SEVENTY, client, USER, budget_for(24, 2048, False, min_mcp_tools=0))
    assert bare is not None and bare.kept == {f"owui_{n}" for n in range(36)}


def test_the_floor_is_the_most_relevant_after_the_tools_that_are_always_kept() -> None:
    named = [{"role": "user", "content": "Use email_5 for the weather forecast."}]
    choice = choose_within(SEVENTY, [], named, Budget(ROOMY, 1, min_mcp_tools=3))
    assert choice is not None and "s5__email_5" in choice.kept and len(choice.kept) == 3
    assert budget_for(2, None, False, min_mcp_tools=8).min_mcp_tools == 2  # never past the budget itself


def test_ranked_with_ours_a_client_tool_may_be_withheld() -> None:
    client = [tool("get_current_timestamp", "The current time."), tool("forecast_weather", "Weather forecast.")]
    choice = choose_within(SEVENTY, client, USER, Budget(3, ROOMY, rank_client_tools=True))
    assert choice is not None and len(choice.kept) == 3
    assert "forecast_weather" in choice.kept and "get_current_timestamp" in choice.withheld


@pytest.mark.parametrize("text", ["", "hi", "the and", "!!"])
def test_a_message_with_no_word_to_rank_by_keeps_the_configured_order(text: str) -> None:
    choice = choose_within(SEVENTY, [], [{"role": "user", "content": text}], Budget(3, ROOMY))
    assert choice is not None and sorted(choice.kept) == sorted(names(SEVENTY[:3]))


def test_the_contexts_share_is_known_only_from_the_upstream() -> None:
    assert budget_for(16, None, False).max_chars > 10**9  # a guessed context never cuts tools
    assert budget_for(16, 8192, False).max_chars == 8192 // 2 * 3


class Reports:
    def __init__(self, context: int | None) -> None:
        self.context = context

    async def supports_vision(self, model: str | None) -> bool:
        return False

    async def context_length(self, model: str | None) -> int | None:
        return self.context


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("settings", "reported", "budget"),
    [
        ({}, 8192, Budget(24, 12_288, False, 4, 8192)),
        ({}, None, Budget(24, 1 << 40, False, 4, None)),
        ({"context_tokens": 32768}, 8192, Budget(24, 49_152, False, 4, 32768)),  # the operator knows best
        ({"context_tokens": 4096}, None, Budget(24, 6_144, False, 4, 4096)),
        ({"tool_budget": 0}, 8192, None),  # no budget: every tool, whatever the context
    ],
)
async def test_tool_budget_0_and_context_tokens_are_honest_escape_hatches(
    settings: dict[str, Any], reported: int | None, budget: Budget | None
) -> None:
    configured = Settings.load(_env_file=None, **settings)
    assert await tool_budget_for(configured, Reports(reported), "qwen") == budget


@pytest.fixture(scope="module")
def budgeted(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    # Three copies of the basic server: 36 MCP tools, four of which a request may be offered.
    servers = {name: stdio_entry("basic.py") for name in ("basic", "other", "third")}
    with running_gateway(tmp_path_factory.mktemp("budget"), servers, ready=tuple(servers),
                         upstream_url=f"{upstream.url}/v1", tool_budget=4) as gateway:
        yield gateway


def offered(upstream: FakeUpstream, request: int = 0) -> list[str]:
    return names(upstream.chat_requests()[request].get("tools") or [])


def test_a_request_past_the_budget_gets_the_relevant_tools_and_the_log_says_what_was_left_out(
    budgeted: Gateway, upstream: FakeUpstream
) -> None:
    upstream.script(Turn(content="ok"))
    with capture_logs() as logs:
        budgeted.client().chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Add two numbers, please."}])
    kept = offered(upstream)
    assert len(kept) == 4 and {"basic__add", "other__add", "third__add"} <= set(kept)
    [withheld] = [e for e in logs if e["event"] == "tools_withheld"]
    assert withheld["withheld"] == len(withheld["names"]) == 32 and not set(withheld["names"]) & set(kept)
    assert withheld["log_level"] == "warning" and "TOOLBRIDGE_TOOL_BUDGET (4 tools)" in withheld["why"]
    [line] = [e for e in logs if e["event"] == "request" and e["path"] == "/v1/chat/completions"]
    assert (line["tools_offered"], line["tools_withheld"]) == (4, 32)


def test_a_tool_called_in_an_earlier_turn_stays_offered(budgeted: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(Turn(calls=[Call("third__get_weather", {"city": "Oslo"})]), Turn(content="Cold."))
    client = budgeted.client(default_headers={"X-Toolbridge-Tools": "-basic"})
    question = {"role": "user", "content": "How is the weather in Oslo?"}
    answer = client.chat.completions.create(model="m", messages=[question]).choices[0].message.content
    upstream.script(Turn(content="ok"))
    later = [question, {"role": "assistant", "content": answer}, {"role": "user", "content": "Add 2 and 3."}]
    client.chat.completions.create(model="m", messages=later)
    assert "third__get_weather" in offered(upstream)  # restored from memory, so still offered
    assert {"other__add", "third__add"} <= set(offered(upstream))


def test_a_follow_up_on_the_same_subject_is_sent_the_tools_of_the_turn_before_in_their_order(
    budgeted: Gateway, upstream: FakeUpstream
) -> None:
    """Through the openai SDK, as Open WebUI keeps a conversation (the answer's text only; the call restored from
    memory): the follow-up's request starts as the one before did, so the model server's prompt cache holds."""
    upstream.script(Turn(calls=[Call("third__get_weather", {"city": "Oslo"})]), Turn(content="Cold."))
    client = budgeted.client()
    question = {"role": "user", "content": "How is the weather in Oslo?"}
    answer = client.chat.completions.create(model="m", messages=[question]).choices[0].message.content
    first = offered(upstream)
    upstream.script(Turn(content="Colder."))  # and forgets the requests before
    again = "And the weather in Bergen? Try again if it fails."
    later = [question, {"role": "assistant", "content": answer}, {"role": "user", "content": again}]
    client.chat.completions.create(model="m", messages=later)
    follow_up = offered(upstream)
    assert len(first) == 4 and "third__get_weather" in first and follow_up == first
    listed = httpx.get(f"{budgeted.url}/tools", params={"q": again}).json()  # its words alone: a `fail` tool too
    assert "basic__fail" in [t["function"]["name"] for t in listed["data"] if t["offered"]]
    assert "basic__fail" not in follow_up


def test_tools_with_a_query_agrees_with_what_a_request_is_offered(budgeted: Gateway, upstream: FakeUpstream) -> None:
    text = "Echo this text back to me."
    listed = httpx.get(f"{budgeted.url}/tools", params={"q": text}).json()
    upstream.script(Turn(content="ok"))
    budgeted.client().chat.completions.create(model="m", messages=[{"role": "user", "content": text}])
    # Listed as offered, in the request's order: the most relevant first.
    assert [t["function"]["name"] for t in listed["data"] if t["offered"]] == offered(upstream)
    assert [t["position"] for t in listed["data"] if t["offered"]] == [1, 2, 3, 4]
    assert listed["data"][0]["function"]["name"] == "basic__echo" and "position" not in listed["data"][-1]
    rest = [t["score"] for t in listed["data"] if not t["offered"]]
    assert rest == sorted(rest, reverse=True)  # then the withheld, best first
    scores = {t["function"]["name"]: t["score"] for t in listed["data"]}
    assert scores["basic__echo"] > scores["basic__add"] and len(listed["withheld"]) == 32
    assert "score" not in httpx.get(f"{budgeted.url}/tools").json()["data"][0]  # without q: the tools as they are


def test_lm_studios_context_limits_the_tools_of_its_models(tmp_path: Path, upstream: FakeUpstream) -> None:
    # The fake LM Studio's qwen3-8b has 8,192 tokens: half of it, at 3 characters a token, is 12,288
    # characters of tool definitions. A client tool of 12,000 characters would leave no room for ours:
    # it is sent compact instead. A model LM Studio does not report ("m") gets it as it is.
    servers = {"basic": stdio_entry("basic.py")}
    big = {"type": "function", "function": {"name": "big_client_tool", "description": "x" * 12_000,
                                            "parameters": {"type": "object", "properties": {}}}}
    with running_gateway(tmp_path, servers, ready=["basic"], upstream_url=f"{upstream.url}/v1",
                         tool_budget=24) as gateway:
        for model, fits in ((MODEL, False), ("m", True)):
            upstream.script(Turn(content="ok"))
            gateway.client().chat.completions.create(
                model=model, messages=[{"role": "user", "content": "Echo hi."}], tools=[big])
            sent = upstream.chat_requests()[0]["tools"]
            assert sent[0]["function"]["name"] == "big_client_tool"  # never dropped
            assert (sent[0] == big) is fits and len(sent[0]["function"]["description"]) <= (12_000 if fits else 200)
            assert fits or len(json.dumps(sent, separators=(",", ":"))) <= 12_288
            assert "basic__echo" in names(sent)


def test_a_withheld_client_tool_called_anyway_goes_back_to_the_client(tmp_path: Path, upstream: FakeUpstream) -> None:
    servers = {"basic": stdio_entry("basic.py")}
    client_tools = [tool("get_current_timestamp", "The current time."), tool("write_note", "Write a note.")]
    with running_gateway(tmp_path, servers, ready=["basic"], upstream_url=f"{upstream.url}/v1", tool_budget=2,
                         rank_client_tools=True) as gateway:
        upstream.script(Turn(calls=[Call("write_note", {})]))
        answer = gateway.client().chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Echo hi and add 1 and 2."}], tools=client_tools)
    assert "write_note" not in offered(upstream)
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.tool_calls[0].function.name == "write_note"


def test_ranking_writes_nothing_to_the_log_below_warning() -> None:
    # bm25s sets its own logger to DEBUG when imported, and logs at every index it builds; the gateway's
    # handler sits on the root logger at the configured level, which records from below do not pass through.
    seen: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = seen.append  # type: ignore[method-assign]
    root = logging.getLogger()
    level, root.level = root.level, logging.INFO
    root.addHandler(handler)
    try:
        choose_within(SEVENTY, [], USER, Budget(3, ROOMY))
    finally:
        root.removeHandler(handler)
        root.level = level
    assert [r.getMessage() for r in seen if r.name.startswith("bm25s")] == []


def test_the_log_line_names_the_best_fifty_of_a_thousand_withheld() -> None:
    from app.chat.loop_options import _say_withheld

    thousand = [tool(f"t{n}", f"Works with weather number {n}.") for n in range(1000)]
    choice = choose_within(thousand, [], USER, Budget(4, ROOMY))
    assert choice is not None
    with capture_logs() as logs:
        _say_withheld(choice, Budget(4, ROOMY), [])
    [line] = logs
    assert line["withheld"] == 996 and line["names"] == list(choice.withheld[:50])
