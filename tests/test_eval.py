"""The model evaluation's own parts, in CI with the scripted model: the handler's prompt and grammar logic,
the task files, the scoring, and one run through a real gateway. The real-model run is a benchmark."""

from pathlib import Path

import httpx
import pytest

from app.main import create_app
from bench.eval.prompting import ANSWER, CALL, allowed, choice_grammar, conversation, offered_tools, parse_choice
from bench.eval.runner import Outcome, run_task, table, tool_names
from bench.eval.scoring import Observed, Score, observe, score
from bench.eval.tasks import Task, load_tasks
from bench.scripted_model import decide
from tests.conftest import make_settings, servers_ready, wait_for_health
from tests.support.fake_upstream import FakeUpstream, Turn
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


def test_the_task_files_load_with_unique_ids_and_every_category() -> None:
    tasks = load_tasks()
    assert len({t.id for t in tasks}) == len(tasks) >= 10
    assert {t.category for t in tasks} >= {"user names the tool", "user describes the need",
                                           "arguments copied from the user", "plain chat, no tool"}
    assert all(t.turns and (t.tool is not None or not t.arguments) for t in tasks)


NAMED_SUM = Task("s", "c", ["Use get-sum to add 2 and 3."], "get-sum", {"a": 2, "b": 3}, ["5"])


@pytest.mark.parametrize(
    ("task", "seen", "expected"),
    [
        (NAMED_SUM, Observed([("get-sum", {"a": 2.0, "b": 3})], "It is 5."), (True, True, True, True)),
        (NAMED_SUM, Observed([("get-sum", {"a": 5, "b": 4})], "It is 9."), (False, True, False, False)),
        (NAMED_SUM, Observed([("echo", {"message": "5"}), ("get-sum", {"a": 2, "b": 3})], "5"),
         (False, False, False, True)),
        (NAMED_SUM, Observed([], "5"), (False, False, False, True)),
        (Task("c", "c", ["Hi"], None), Observed([], "Hello!"), (True, True, True, True)),
        (Task("c", "c", ["Hi"], None), Observed([("echo", {})], "Hello!"), (False, False, False, True)),
        (Task("z", "c", ["t"], "get_current_time", {"timezone": "asia/tokyo"}),
         Observed([("get_current_time", {"timezone": "Asia/Tokyo "})], ""), (True, True, True, True)),
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


def test_a_task_runs_through_a_real_gateway_and_is_scored(tmp_path: Path) -> None:
    """The scripted model calls the time tool when asked the time: the whole path of the eval, minus llama.cpp."""
    model = FakeUpstream(default=lambda body: decide(body, words=5), record=False)
    with ServerThread(model.app) as upstream:
        settings = make_settings(tmp_path, {"time": {"command": "mcp-server-time"}}, upstream_url=f"{upstream.url}/v1")
        with ServerThread(create_app(settings)) as gateway, httpx.Client(timeout=60) as client:
            wait_for_health(gateway.url, servers_ready("time"))
            tool_of = tool_names(gateway.url)
            assert tool_of["time__get_current_time"] == "get_current_time"
            tasks = {t.id: t for t in load_tasks()}
            for streamed in (False, True):
                timed, _ = run_task(client, gateway.url, tasks["need-time"], streamed, tool_of)
                chat, _ = run_task(client, gateway.url, tasks["chat-greeting"], streamed, tool_of)
                summed, _ = run_task(client, gateway.url, tasks["named-sum"], streamed, tool_of)
                assert (timed.passed, chat.passed, summed.passed, summed.tool_ok) == (True, True, False, False)


def test_a_task_the_gateway_answers_with_an_error_fails(tmp_path: Path) -> None:
    broken = FakeUpstream(default=lambda _body: Turn(status=500, error="model crashed"), record=False)
    with ServerThread(broken.app) as upstream:
        settings = make_settings(tmp_path, None, upstream_url=f"{upstream.url}/v1")
        with ServerThread(create_app(settings)) as gateway, httpx.Client(timeout=60) as client:
            task = Task("c", "c", ["Hi"], None)
            for streamed in (False, True):
                result, _ = run_task(client, gateway.url, task, streamed, {})
                assert result == Score(False, False, False, False)


def test_the_table_counts_per_configuration_and_mode() -> None:
    task = Task("t", "c", ["x"], None)
    outcomes = [Outcome("defaults", task, False, Score(True, True, True, True), 1.0),
                Outcome("defaults", task, False, Score(False, False, False, True), 3.0),
                Outcome("raw", task, True, Score(False, True, False, False), 2.0)]
    lines = table(outcomes).splitlines()
    assert lines[2].split() == ["defaults", "whole", "1/2", "1/2", "1/2", "2/2", "2.00"]
    assert lines[3].split() == ["raw", "stream", "0/1", "1/1", "0/1", "0/1", "2.00"]
