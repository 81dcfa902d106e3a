"""The model evaluation's own parts, in CI with the scripted model: the handler's prompt and grammar logic,
the task files, the scoring, and one run through a real gateway. The real-model run is a benchmark."""

import json
import sys
from pathlib import Path

import httpx
import pytest

from app.chat.asking import Reply, read_reply
from bench.eval.doors import DOORS, ask
from bench.eval.prompting import ANSWER, CALL, allowed, choice_grammar, conversation, offered_tools, parse_choice
from bench.eval.runner import CONFIGS, Outcome, by_category, run_task, same_as_defaults, table, tool_names
from bench.eval.scoring import Observed, Score, observe, score
from bench.eval.tasks import ExpectedCall, Task, client_tools, load_tasks
from bench.scripted_model import decide
from tests.conftest import running_gateway, stdio_entry
from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.support.servers import ServerThread

SUM = {"type": "function", "function": {"name": "get-sum", "description": "Adds two numbers.",
                                        "parameters": {"type": "object", "properties": {"a": {}, "b": {}}}}}
ECHO = {"type": "function", "function": {"name": "echo", "description": "Echoes.", "parameters": {}}}


def test_the_decision_grammar_offers_an_answer_and_each_tool() -> None:
    grammar = choice_grammar(["get-sum", "echo"], may_answer=True, may_call=True)
    assert grammar == 'root ::= "I will answer directly." | "I will call " ("get-sum" | "echo") "."'
    assert choice_grammar(["echo"], may_answer=False, may_call=True) == 'root ::= "I will call " ("echo") "."'
    with pytest.raises(ValueError):
        choice_grammar([], may_answer=False, may_call=True)


@pytest.mark.parametrize(
    ("text", "chosen"),
    [(ANSWER, None), ("I will call get-sum.", "get-sum"), ("I will call echo.", "echo"), ("I will call x.", None)],
)
def test_the_decision_is_read_back(text: str, chosen: str | None) -> None:
    assert parse_choice(text, ["get-sum", "echo"]) == chosen


@pytest.mark.parametrize(
    ("tool_choice", "expected"),
    [(None, (True, ["get-sum", "echo"])), ("auto", (True, ["get-sum", "echo"])), ("none", (True, [])),
     ("required", (False, ["get-sum", "echo"])),
     ({"type": "function", "function": {"name": "echo"}}, (False, ["echo"]))],
)
def test_tool_choice_decides_what_may_be_chosen(tool_choice: object, expected: tuple) -> None:
    assert allowed(tool_choice, ["get-sum", "echo"]) == expected


def test_a_tool_conversation_is_shown_as_plain_turns() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Add 2 and 3."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get-sum", "arguments": '{"a": 2, "b": 3}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "5"},
        {"role": "user", "content": [{"type": "text", "text": "Thanks"}]},
    ]
    shown = conversation(messages, offered_tools([SUM, ECHO]))
    assert [m["role"] for m in shown] == ["system", "user", "assistant", "user"]
    assert shown[0]["content"].startswith("Be brief.\n\nYou can call these tools.")
    assert "- get-sum(a, b): Adds two numbers." in shown[0]["content"]
    assert "- echo(no arguments): Echoes." in shown[0]["content"]
    assert shown[2]["content"] == CALL.format(name="get-sum") + ' Arguments: {"a": 2, "b": 3}'
    assert shown[3]["content"] == "Result of get-sum: 5\n\nThanks"  # merged: templates want turns to alternate


CATEGORIES = {"the user names the tool", "the user describes the need", "arguments copied from the user",
              "a bad first call fixed from the invalid_arguments hint", "a tool error reported honestly",
              "two tools in sequence", "plain chat, no tool", "a follow-up that needs an earlier turn's result",
              "with Open WebUI's 36 tools", "the person approves a call (a pause for a yes)",
              "the person answers a server's question (a pause for an answer)", "hundreds of tools"}


def test_the_task_files_hold_forty_tasks_of_every_category_the_issue_names() -> None:
    tasks = load_tasks()
    assert len({t.id for t in tasks}) == len(tasks)
    assert {t.category for t in tasks} == CATEGORIES
    assert len([t for t in tasks if t.client_tools is None]) >= 40
    assert all(t.turns for t in tasks)
    assert all(len(t.turns) > 1 for t in tasks if t.category.startswith("a follow-up"))
    # the person's reply is a turn of its own, after the request that made the model ask
    approvals = [t for t in tasks if t.category.startswith("the person approves")]
    assert approvals and all(len(t.turns) > 1 and read_reply(t.turns[1]) is not Reply.OTHER for t in approvals)
    # issue 48: a grant for the chat, then the tool called twice (asked once); an edit before approving
    assert {"yes for this chat", "yes, but path={root}/draft.txt"} <= {t.turns[1] for t in approvals}
    answers = [t for t in tasks if t.category.startswith("the person answers")]
    assert all(len(t.turns) > 1 for t in answers) and {t.turns[1] for t in answers} >= {"Friday", "decline"}
    assert any(len(t.turns) > 2 for t in answers)  # and one that goes on after the answer
    assert all(t.calls is not None and len(t.calls) >= 2 for t in tasks if t.category == "two tools in sequence")


def test_open_webuis_36_tools_are_a_fixture_of_valid_function_tools() -> None:
    from jsonschema import Draft202012Validator

    tools = client_tools("open_webui")
    names = [tool["function"]["name"] for tool in tools]
    assert len(names) == len(set(names)) == 36
    assert {"get_current_timestamp", "write_note", "create_automation"} <= set(names)
    for tool in tools:
        Draft202012Validator.check_schema(tool["function"]["parameters"])
        assert tool["function"]["parameters"]["type"] == "object"
    assert client_tools(None) == []


def test_root_is_put_into_turns_and_expected_arguments() -> None:
    task = Task("r", "c", ["Read {root}/a.txt"], [ExpectedCall("read_text_file", {"path": "{root}/a.txt"})],
                answer=["{root}"])
    placed = task.in_folder("/tmp/x")
    assert (placed.turns, placed.calls, placed.answer) == (
        ["Read /tmp/x/a.txt"], [ExpectedCall("read_text_file", {"path": "/tmp/x/a.txt"})], ["/tmp/x"])


NAMED_SUM = Task("s", "c", ["Use get-sum to add 2 and 3."], [ExpectedCall("get-sum", {"a": 2, "b": 3})], ["5"])
FIX = Task("f", "c", ["x"], [ExpectedCall("get_forecast", {"days": 7})], ["snow"])
SEQUENCE = Task("q", "c", ["x"], [ExpectedCall("lookup_order", {"order_id": "A-1"}), ExpectedCall("get_weather")])
HONEST = Task("h", "c", ["x"], [ExpectedCall("lookup_order")], answer_any=["not found", "no order"],
              answer_not=["shipped"])
CHAT = Task("c", "c", ["Hi"], [])
FOLLOW = Task("u", "c", ["x", "y"], None, ["4817"])
# the day the person chose, not the server's question (asked again) that lists every choice
DAY = Task("d", "c", ["x", "Tuesday", "y"], None, ["Tuesday"], answer_not=["Monday", "Friday"])


@pytest.mark.parametrize(
    ("task", "seen", "expected"),
    [
        (NAMED_SUM, Observed([("get-sum", {"a": 2.0, "b": 3})], "It is 5."), (True, True, True, True)),
        (NAMED_SUM, Observed([("get-sum", {"a": 5, "b": 4})], "It is 9."), (False, True, False, False)),
        (NAMED_SUM, Observed([("echo", {"message": "5"}), ("get-sum", {"a": 2, "b": 3})], "5"),
         (False, False, False, True)),
        (NAMED_SUM, Observed([], "5"), (False, False, False, True)),
        (CHAT, Observed([], "Hello!"), (True, True, True, True)),
        (CHAT, Observed([("echo", {})], "Hello!"), (False, False, False, True)),
        (Task("z", "c", ["t"], [ExpectedCall("get_current_time", {"timezone": "asia/tokyo"})]),
         Observed([("get_current_time", {"timezone": "Asia/Tokyo "})], ""), (True, True, True, True)),
        # a bad first try, fixed from the hint
        (FIX, Observed([("get_forecast", {"days": 10}), ("get_forecast", {"days": 7})], "Snow."),
         (True, True, True, True)),
        (FIX, Observed([("get_forecast", {"days": 10})], "Snow."), (False, True, False, True)),
        # two tools, in order
        (SEQUENCE, Observed([("lookup_order", {"order_id": "A-1"}), ("get_weather", {"city": "Oslo"})], ""),
         (True, True, True, True)),
        (SEQUENCE, Observed([("lookup_order", {"order_id": "A-1"})], ""), (False, True, False, True)),
        (SEQUENCE, Observed([("get_weather", {}), ("lookup_order", {"order_id": "A-1"})], ""),
         (False, False, False, True)),
        # honesty: one of the words, none of the forbidden ones
        (HONEST, Observed([("lookup_order", {})], "That order was not found."), (True, True, True, True)),
        (HONEST, Observed([("lookup_order", {})], "It has shipped."), (False, True, True, False)),
        (HONEST, Observed([("lookup_order", {})], "Not found, but it shipped."), (False, True, True, False)),
        # only the answer counts
        (FOLLOW, Observed([], "The code is 4817."), (True, True, True, True)),
        (FOLLOW, Observed([("read_text_file", {})], "I do not know."), (False, True, True, False)),
        (DAY, Observed([], "It is scheduled for Tuesday."), (True, True, True, True)),
        (DAY, Observed([], "Which day? one of `Monday`, `Tuesday`, ... `Friday`"), (False, True, True, False)),
    ],
)
def test_scoring(task: Task, seen: Observed, expected: tuple) -> None:
    result = score(task, seen)
    assert (result.passed, result.tool_ok, result.arguments_ok, result.answer_ok) == expected


def test_calls_are_read_from_the_details_trace() -> None:
    content = ('\n<details type="tool_calls" done="true" id="c1" name="everything__get-sum" '
               'arguments="{&quot;a&quot;: 2, &quot;b&quot;: 3}" result="&quot;5&quot;" duration="3">\n'
               "<summary>Tool Executed</summary>\n</details>\nThe sum is 5.")
    seen = observe(content, {"everything__get-sum": "get-sum"})
    assert seen == Observed([("get-sum", {"a": 2, "b": 3})], "The sum is 5.")
    ended = observe(content, {"everything__get-sum": "get-sum"}, [("write_note", {"title": "x"})])
    assert ended.calls == [("get-sum", {"a": 2, "b": 3}), ("write_note", {"title": "x"})]


def test_a_call_that_waits_for_the_person_is_read_as_the_call_made() -> None:
    """The gateway's own waiting block, as the details trace writes it: the model's call, not yet run."""
    from app.chat.answer.trace import render_waiting
    from app.openai.accumulate import ToolCall

    waiting = render_waiting("details", [ToolCall("c1", "files__delete", '{"path": "a \\"b\\".txt"}')])
    assert waiting is not None
    seen = observe(waiting.text + "\nThe model wants to run a tool.", {"files__delete": "delete"})
    assert seen == Observed([("delete", {"path": 'a "b".txt'})], "The model wants to run a tool.")


@pytest.mark.parametrize("door", DOORS)
def test_a_task_runs_through_a_real_gateway_and_is_scored(tmp_path: Path, door: str) -> None:
    """The scripted model calls the time tool when asked the time: the whole path of the eval, minus llama.cpp,
    through each of the gateway's front doors."""
    model = FakeUpstream(default=lambda body: decide(body, words=5), record=False)
    servers = {"time": {"command": "mcp-server-time"}}
    with (
        ServerThread(model.app) as upstream,
        running_gateway(tmp_path, servers, ready=("time",), upstream_url=f"{upstream.url}/v1") as gateway,
        httpx.Client(timeout=60) as client,
    ):
        tool_of = tool_names(gateway.url)
        assert tool_of["time__get_current_time"] == "get_current_time"
        tasks = {t.id: t for t in load_tasks()}
        for streamed in (False, True):
            timed, _, tokens = run_task(client, gateway.url, tasks["need-time"], streamed, tool_of, door=door)
            assert tokens > 0  # summed over both rounds, streamed too
            chat, *_ = run_task(client, gateway.url, tasks["chat-greeting"], streamed, tool_of, door=door)
            summed, *_ = run_task(client, gateway.url, tasks["named-sum"], streamed, tool_of, door=door)
            assert (timed.passed, chat.passed, summed.passed, summed.tool_ok) == (True, True, False, False)


def test_a_task_the_gateway_answers_with_an_error_fails(tmp_path: Path) -> None:
    broken = FakeUpstream(default=lambda _body: Turn(status=500, error="model crashed"), record=False)
    with (
        ServerThread(broken.app) as upstream,
        running_gateway(tmp_path, upstream_url=f"{upstream.url}/v1") as gateway,
        httpx.Client(timeout=60) as client,
    ):
        task = Task("c", "c", ["Hi"], [])
        for streamed in (False, True):
            result, *_ = run_task(client, gateway.url, task, streamed, {})
            assert result == Score(False, False, False, False)


def test_the_table_counts_per_configuration_and_mode() -> None:
    task = Task("t", "c", ["x"], [])
    outcomes = [Outcome("defaults", task, False, Score(True, True, True, True), 1.0, 100),
                Outcome("defaults", task, False, Score(False, False, False, True), 3.0, 300),
                Outcome("raw", task, True, Score(False, True, False, False), 2.0, 50)]
    outcomes.append(Outcome("defaults via responses", task, True, Score(True, True, True, True), 1.0, 10))
    lines = table(outcomes).splitlines()
    assert lines[2].split() == ["defaults", "whole", "1/2", "1/2", "1/2", "2/2", "2.00", "200"]
    assert lines[3].split() == ["raw", "stream", "0/1", "1/1", "0/1", "0/1", "2.00", "50"]
    assert lines[4].split() == ["defaults", "via", "responses", "stream", "1/1", "1/1", "1/1", "1/1", "1.00", "10"]


def test_the_category_table_counts_passes_per_configuration() -> None:
    named, chat = Task("n", "named", ["x"], []), Task("c", "chat", ["x"], [])
    outcomes = [Outcome("defaults", named, False, Score(True, True, True, True), 1.0),
                Outcome("defaults", chat, False, Score(False, False, False, True), 1.0),
                Outcome("raw", named, False, Score(False, False, False, False), 1.0),
                Outcome("raw", chat, False, Score(True, True, True, True), 1.0)]
    assert by_category(outcomes).splitlines() == [
        "| configuration | named | chat |", "|---|---|---|", "| defaults | 1/1 | 0/1 |", "| raw | 0/1 | 1/1 |"]


def test_every_value_of_each_setting_the_model_sees_is_a_configuration() -> None:
    assert {"prefix=always", "prefix=on-conflict", "result=envelope", "result=text", "hint=true", "hint=false",
            "schema=lmstudio", "schema=openai", "schema=passthrough", "budget=0", "budget=8", "budget=16", "budget=24",
            "rank-client=true", "min-mcp=0", "min-mcp=4", "order=configured", "discovery=find_tools", "defaults",
            "raw"} <= set(CONFIGS)
    repeats = {name for name in CONFIGS if same_as_defaults(name)}
    assert "defaults" not in repeats and "raw" not in repeats
    # One value of prefix, result, hint, budget, rank-client, min-mcp, order and discovery is the default; auto is
    # no profile.
    assert len(repeats) == 8


@pytest.mark.parametrize("door", DOORS)
def test_the_help_desk_and_client_tools_through_a_real_gateway(tmp_path: Path, door: str) -> None:
    """The eval's own server enforces its limits through the gateway's invalid_arguments, and a call of the
    client's own tools (Open WebUI's) ends the answer and is scored as a call, streamed and whole, through each
    door (its own tool-call format read back)."""
    from bench.eval.runner import HELPDESK

    model = FakeUpstream(default=lambda body: decide(body, words=5), record=False)
    servers = {"helpdesk": {"command": sys.executable, "args": [str(HELPDESK)]}}
    with (
        ServerThread(model.app) as upstream,
        running_gateway(tmp_path, servers, ready=("helpdesk",), upstream_url=f"{upstream.url}/v1") as gateway,
        httpx.Client(timeout=60) as client,
    ):
        tool_of = tool_names(gateway.url)
        too_many = Task("f", "c", ['call helpdesk__get_forecast with {"city": "Oslo", "days": 10}'],
                        [ExpectedCall("get_forecast", {"city": "Oslo", "days": 10})], ["invalid_arguments", "7"])
        unknown = Task("e", "c", ['call helpdesk__lookup_order with {"order_id": "B-9"}'],
                       [ExpectedCall("lookup_order")], ["No order has the id"])
        own = Task("o", "c", ["call get_current_timestamp with {}"], [ExpectedCall("get_current_timestamp")],
                   client_tools="open_webui")
        for streamed in (False, True):
            for task in (too_many, unknown, own):
                result, *_ = run_task(client, gateway.url, task, streamed, tool_of, door=door)
                assert result.passed, (task.id, streamed, result)


def test_the_help_desks_question_is_asked_answered_and_declined_through_a_real_gateway(tmp_path: Path) -> None:
    """schedule_delivery asks the person which day (MCP 2026-07-28's input_required) over real stdio: the question
    ends the first turn with its choices, the scripted reply is the answer the server gets (the model then sees
    only the call and its result, and a later turn still has it), decline reaches the server, and an unknown
    order is an error before anyone is asked."""
    from bench.eval.runner import HELPDESK

    model = FakeUpstream(default=lambda body: decide(body, words=5))
    servers = {"helpdesk": {"command": sys.executable, "args": [str(HELPDESK)]}}
    schedule = 'call helpdesk__schedule_delivery with {"order_id": "%s"}'
    called = [ExpectedCall("schedule_delivery", {"order_id": "A-1001"})]
    asked = Task("a", "c", [schedule % "A-1001"], called, ["Which day should a red kettle (order A-1001)",
                                                            "Monday", "Friday", "decline"])
    answered = Task("f", "c", [schedule % "A-1001", "Friday"], called, ["Delivery of A-1001 scheduled for Friday"])
    later = Task("l", "c", [schedule % "A-1001", "friday", 'call helpdesk__lookup_order with {"order_id": "A-1001"}'],
                 [ExpectedCall("lookup_order")], ["Oslo"])
    declined = Task("d", "c", [schedule % "A-1001", "decline"], called,
                    ["Delivery of A-1001 not scheduled: the person chose decline"], answer_not=["scheduled for"])
    unknown = Task("u", "c", [schedule % "B-9"], [ExpectedCall("schedule_delivery")], ["No order has the id"],
                   answer_not=["Which day"])
    with (
        ServerThread(model.app) as upstream,
        running_gateway(tmp_path, servers, ready=("helpdesk",), upstream_url=f"{upstream.url}/v1") as gateway,
        httpx.Client(timeout=60) as client,
    ):
        tool_of = tool_names(gateway.url)
        for streamed in (False, True):
            for task in (asked, answered, later, declined, unknown):
                result, *_ = run_task(client, gateway.url, task, streamed, tool_of)
                assert result.passed, (task.id, streamed, result)
                if task is later:  # the model was given the call and its result, never the question or the reply
                    given = json.dumps(model.chat_requests()[-1]["messages"])
                    assert "scheduled for Friday" in given and "Which day" not in given
                    assert '"content": "friday"' not in given


def test_the_model_reads_the_same_conversation_through_every_door(tmp_path: Path) -> None:
    """What makes the eval's rows comparable: a tool turn and a follow-up sent through each door reach the model
    as the same chat requests (the Messages door adds only the max_tokens its API requires)."""
    model = FakeUpstream()
    with (
        ServerThread(model.app) as upstream,
        running_gateway(tmp_path, {"basic": stdio_entry("basic.py")}, ready=("basic",),
                        upstream_url=f"{upstream.url}/v1") as gateway,
        httpx.Client(timeout=60) as client,
    ):
        seen = {}
        for door in DOORS:
            model.script(Turn(calls=[Call("basic__echo", {"text": "hi"})]), Turn(content="Done."), Turn(content="2"))
            messages = [{"role": "user", "content": "Echo hi"}]
            for streamed in (False, True):
                body = {"model": "m", "messages": messages, "stream": streamed, "temperature": 0}
                content, _, _ = ask(door, client, gateway.url, body)
                messages = [*messages, {"role": "assistant", "content": content}, {"role": "user", "content": "More?"}]
            seen[door] = [({k: v for k, v in sent.items() if k not in ("stream", "stream_options", "max_tokens")})
                          for sent in model.chat_requests()]
    assert len(seen["chat"]) == 3 and seen["chat"][2]["messages"][-1] == {"role": "user", "content": "More?"}
    assert all(seen[door] == seen["chat"] for door in DOORS), {door: seen[door] for door in DOORS}


def test_the_gateways_find_tools_step_is_not_the_models_first_call() -> None:
    found = ('<details type="tool_calls" name="find_tools" arguments="{&quot;need&quot;: &quot;time&quot;}">'
             '</details><details type="tool_calls" name="get_current_time" arguments="{}"></details>It is noon.')
    assert observe(found, {"get_current_time": "get_current_time"}).calls == [("get_current_time", {})]
    # a server's own tool of that name is a call like any other
    own = {"find_tools": "find_tools", "get_current_time": "get_current_time"}
    assert observe(found, own).calls[0][0] == "find_tools"
