"""The eval's category at scale: the twelve recorded servers served offline (bench/eval/catalogue_server.py) exactly as
recorded, their canned results, the tasks written over them, and one task through a real gateway with the
scripted model."""

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from jsonschema import Draft7Validator, validators
from mcp import Client, StdioServerParameters

from bench.eval.catalogue_server import CATALOGUE, canned_results, load, pick, smallest
from bench.eval.runner import CATALOGUE as MOUNTED
from bench.eval.runner import CATALOGUE_SERVER, catalogue_config, run_task, tool_names
from bench.eval.scoring import Observed, score
from bench.eval.tasks import ExpectedCall, Task, load_tasks
from bench.scripted_model import decide
from tests.conftest import running_gateway
from tests.support.fake_upstream import FakeUpstream
from tests.support.servers import ServerThread

SERVERS = sorted(path.stem for path in CATALOGUE.glob("*.json") if path.stem != "results")
RECORDED = {name: load(name) for name in SERVERS}
TOOLS = {name: {tool["name"]: tool for tool in recorded["tools"]} for name, recorded in RECORDED.items()}
SERVER_OF = {tool: server for server, tools in TOOLS.items() for tool in tools}
SCALE = [task for task in load_tasks() if task.category == "hundreds of tools"]


def cases(entry: Any) -> list[dict[str, Any]]:
    """A canned entry's cases (one, without a word, for a plain result)."""
    if isinstance(entry, list) and entry and all(isinstance(c, dict) and "result" in c for c in entry):
        return entry
    return [{"result": entry}]


def text_of(result: Any) -> str:
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)


def validator(schema: dict[str, Any]) -> Any:
    return validators.validator_for(schema, default=Draft7Validator)(schema)


def test_the_catalogue_holds_twelve_servers_and_the_runner_mounts_each_under_its_recorded_name(tmp_path: Path) -> None:
    assert len(SERVERS) == 12 and sum(len(tools) for tools in TOOLS.values()) == 155
    assert all(recorded["server"] == name for name, recorded in RECORDED.items())
    mounted = json.loads(catalogue_config(tmp_path).read_text())["mcpServers"]
    assert sorted(mounted) == sorted(MOUNTED) == SERVERS
    assert all(entry["args"] == [str(CATALOGUE_SERVER), name] for name, entry in mounted.items())


def test_every_canned_result_is_for_a_recorded_tool_and_fits_its_output_schema() -> None:
    results = canned_results()
    for key, entry in results.items():
        server, tool = key.split("/", 1)
        assert tool in TOOLS[server], key
        schema = TOOLS[server][tool].get("outputSchema")
        for case in cases(entry):
            if schema is not None:  # sent as structuredContent too: it must be an object the schema accepts
                assert isinstance(case["result"], dict), key
                assert not list(validator(schema).iter_errors(case["result"])), key
        assert "when" not in cases(entry)[-1], f"{key}: the last case is the default, without a word"


def test_a_tool_without_a_canned_result_gets_the_smallest_value_its_output_schema_accepts() -> None:
    schemas = [tool["outputSchema"] for tools in TOOLS.values() for tool in tools.values() if "outputSchema" in tool]
    assert len(schemas) == 44
    for schema in schemas:
        assert not list(validator(schema).iter_errors(smallest(schema)))


def test_a_case_is_picked_by_a_word_in_the_arguments() -> None:
    entry = [{"when": "tokyo", "result": "T"}, {"when": "new york", "result": "N"}, {"result": "UTC"}]
    assert pick(entry, {"timezone": "Asia/Tokyo"}) == "T"
    assert pick(entry, {"time": "15:00", "source": "New York"}) == "N"
    assert pick(entry, {"timezone": "UTC"}) == "UTC"
    assert pick({"entities": []}, {"query": "tokyo"}) == {"entities": []}
    assert pick(["a", "b"], {}) == ["a", "b"]  # a JSON list is a result, not cases


async def _check_server(name: str) -> None:
    """Over real stdio: the tools, server info and instructions as recorded (on 2025-11-25, the version the real
    servers spoke when recorded, field for field; on the newest version, less the tasks-era `execution` that
    version removed); every canned result and every schema-bound tool's default passes the client's validation."""
    recorded = RECORDED[name]
    params = StdioServerParameters(command=sys.executable, args=[str(CATALOGUE_SERVER), name])
    async with Client(params, mode="legacy") as client:
        tools = [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in (await client.list_tools()).tools]
        assert len(tools) == len(recorded["tools"])
        for served, expected in zip(tools, recorded["tools"], strict=True):
            for field in ("name", "title", "description", "inputSchema", "outputSchema", "annotations", "execution",
                          "_meta"):
                assert served.get(field) == expected.get(field), (name, expected["name"], field)
            assert served == expected
        assert client.server_info.model_dump(by_alias=True, mode="json", exclude_none=True) == recorded["serverInfo"]
        assert client.instructions == recorded["instructions"]
    async with Client(params) as client:  # the newest protocol version, as the gateway speaks it
        tools = [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in (await client.list_tools()).tools]
        assert tools == [{k: v for k, v in t.items() if k != "execution"} for t in recorded["tools"]]
        results = canned_results()
        for tool in recorded["tools"]:
            key = f"{name}/{tool['name']}"
            for case in cases(results[key]) if key in results else [{}]:
                arguments = {"about": case.get("when", "anything")}
                result = await client.call_tool(tool["name"], arguments)  # raises if the output fails validation
                assert not result.is_error
                text = result.content[0].text  # type: ignore[union-attr]
                if "result" in case:
                    assert text == text_of(case["result"]) or json.loads(text) == case["result"], key
                    if "outputSchema" in tool:
                        assert result.structured_content == case["result"]
                else:  # the generic success names the tool and what it was given
                    assert text == f'{tool["name"]} done (about="anything").'


@pytest.mark.parametrize("name", SERVERS)
def test_the_catalogue_server_serves_the_recorded_server_and_its_canned_results(name: str) -> None:
    anyio.run(_check_server, name)


def test_the_category_holds_at_least_44_tasks_over_all_twelve_servers_with_follow_ups() -> None:
    assert len(SCALE) >= 44
    assert all(t.id.startswith("scale-") and t.servers == "catalogue" for t in SCALE)
    assert [t.id for t in load_tasks() if t.id.startswith("scale-")] == [t.id for t in SCALE]
    assert len([t for t in SCALE if len(t.turns) > 1]) >= 8
    per_server = {name: 0 for name in SERVERS}
    for task in SCALE:
        if task.calls is None:  # a follow-up answered from an earlier turn's result, whichever calls it makes
            assert len(task.turns) > 1, task.id
            continue
        assert task.calls, task.id  # each one needs a tool
        per_server[SERVER_OF[task.calls[0].names[0]]] += 1
    assert all(3 <= count <= 8 for count in per_server.values()), per_server


def test_every_expected_tool_is_recorded_and_no_turn_names_one() -> None:
    identifiers = [tool for tool in SERVER_OF if "_" in tool or "-" in tool]
    for task in SCALE:
        for call in task.calls or []:
            assert all(name in SERVER_OF for name in call.names), task.id
        for turn in task.turns:
            assert not [tool for tool in identifiers if tool.lower() in turn.lower()], (task.id, turn)


def test_each_tasks_answer_facts_are_in_the_canned_result_of_one_of_its_expected_tools() -> None:
    results = canned_results()
    for task in SCALE:
        if not (task.answer or task.answer_any):
            continue
        # a follow-up that only needs the answer: its facts come from an earlier turn's call, of any tool
        keys = [f"{SERVER_OF[name]}/{name}" for call in task.calls for name in call.names] if task.calls else results
        texts = [text_of(case["result"]).lower() for key in keys if key in results for case in cases(results[key])]
        assert any(all(word.lower() in text for word in task.answer)
                   and (not task.answer_any or any(word.lower() in text for word in task.answer_any))
                   for text in texts), task.id


ANY_MEMORY = Task("m", "c", ["What do you remember about Alice?"],
                  [ExpectedCall(("search_nodes", "open_nodes", "read_graph"))], ["Lisbon"])
THEN_ONE_OF = Task("t", "c", ["x"], [ExpectedCall("list_issues"), ExpectedCall(("update_issue", "add_issue_comment"),
                                                                               {"issue_number": 42})])


@pytest.mark.parametrize(
    ("task", "seen", "expected"),
    [
        (ANY_MEMORY, Observed([("search_nodes", {"query": "Alice"})], "In Lisbon."), (True, True, True, True)),
        (ANY_MEMORY, Observed([("read_graph", {})], "She lives in Lisbon."), (True, True, True, True)),
        (ANY_MEMORY, Observed([("create_entities", {}), ("open_nodes", {})], "Lisbon"), (False, False, False, True)),
        (ANY_MEMORY, Observed([], "Lisbon"), (False, False, False, True)),
        (THEN_ONE_OF, Observed([("list_issues", {}), ("add_issue_comment", {"issue_number": 42})], ""),
         (True, True, True, True)),
        (THEN_ONE_OF, Observed([("list_issues", {}), ("add_issue_comment", {"issue_number": 7})], ""),
         (False, True, False, True)),
        (THEN_ONE_OF, Observed([("list_issues", {}), ("create_issue", {"issue_number": 42})], ""),
         (False, True, False, True)),
    ],
)
def test_an_expected_tool_may_be_one_of_several(task: Task, seen: Observed, expected: tuple) -> None:
    result = score(task, seen)
    assert (result.passed, result.tool_ok, result.arguments_ok, result.answer_ok) == expected


def _tasks_from(tmp_path: Path, expect: dict[str, Any], **extra: Any) -> list[Task]:
    (tmp_path / "t.json").write_text(json.dumps([{"id": "a", "category": "c", "turns": ["x"], "expect": expect,
                                                  **extra}]))
    return load_tasks(tmp_path)


def test_alternatives_and_the_server_set_are_read_from_a_task_file(tmp_path: Path) -> None:
    [task] = _tasks_from(tmp_path, {"tool": ["a", "b"], "arguments": {"n": 1}}, servers="catalogue")
    assert (task.calls, task.servers) == ([ExpectedCall(("a", "b"), {"n": 1})], "catalogue")
    [task] = _tasks_from(tmp_path, {"calls": [{"tool": ["a"]}, {"tool": ["b", "c"]}]})
    assert (task.calls, task.servers) == ([ExpectedCall("a"), ExpectedCall(("b", "c"))], "standard")
    assert task.in_folder("/r").calls == task.calls and task.in_folder("/r").servers == "standard"
    for bad in ({"tool": []}, {"tool": ["a", 3]}, {"calls": [{"tool": {}}]}):
        with pytest.raises(ValueError, match="a tool is a name or a non-empty list"):
            _tasks_from(tmp_path, bad)
    with pytest.raises(ValueError, match="unknown servers"):
        _tasks_from(tmp_path, {"tool": "a"}, servers="everything")


# Tasks sent as the scripted model's "call TOOL with ARGUMENTS", so each canned result reaches its answer through
# the gateway: a structured result (memory, Brave's images), a JSON one (GitHub), a case picked by a word (Kubernetes).
CALLED = {"scale-memory-alice": ("search_nodes", {"query": "Alice"}),
          "scale-web-images": ("brave_image_search", {"query": "northern lights Tromsø"}),
          "scale-gh-readme": ("get_file_contents", {"owner": "acme", "repo": "webshop", "path": "README.md"}),
          "scale-k8s-nodes": ("kubectl_get", {"resourceType": "nodes"})}


def test_a_scale_task_runs_through_a_real_gateway_with_the_twelve_servers(tmp_path: Path) -> None:
    """The whole path of the category, minus llama.cpp: the gateway mounts the twelve catalogue servers as the
    runner does; the scripted model asks the time in Tokyo as a task says, and calls other tools as told."""
    model = FakeUpstream(default=lambda body: decide(body, words=5), record=False)
    servers = json.loads(catalogue_config(tmp_path).read_text())["mcpServers"]
    tasks = {t.id: t for t in SCALE}
    with (
        ServerThread(model.app) as upstream,
        running_gateway(tmp_path, servers, ready=tuple(servers), upstream_url=f"{upstream.url}/v1") as gateway,
        httpx.Client(timeout=60) as client,
    ):
        tool_of = tool_names(gateway.url)
        assert sorted(tool_of.values()) == sorted(SERVER_OF)  # all 155, no name shared, so none prefixed
        for streamed in (False, True):
            result, *_ = run_task(client, gateway.url, tasks["scale-time-tokyo"], streamed, tool_of)
            assert result.passed, ("scale-time-tokyo", streamed, result)
        exposed = {mcp: name for name, mcp in tool_of.items()}
        for task_id, (tool, arguments) in CALLED.items():
            told = dataclasses.replace(tasks[task_id], turns=[f"call {exposed[tool]} with {json.dumps(arguments)}"])
            result, *_ = run_task(client, gateway.url, told, False, tool_of)
            assert result.passed, (task_id, result)


def test_the_runner_gives_the_scale_tasks_a_gateway_of_their_own_per_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each configuration starts one gateway per server set the tasks use, and each task runs on its set's."""
    from contextlib import contextmanager

    from bench.eval import runner
    from bench.eval.scoring import Score

    started: list[tuple[str, list[str]]] = []

    @contextmanager
    def gateway(config: dict[str, str], upstream: str, mcp_json: Path, source: Path) -> Any:
        started.append((json.dumps(config), sorted(json.loads(mcp_json.read_text())["mcpServers"])))
        yield mcp_json.name

    ran: list[tuple[str, str]] = []

    def run_task(_client: Any, base: str, task: Task, *_args: Any) -> tuple[Score, float, int]:
        ran.append((base, task.id))
        return Score(True, True, True, True), 0.0, 0

    monkeypatch.setattr(runner, "gateway", gateway)
    monkeypatch.setattr(runner, "tool_names", lambda base: {})
    monkeypatch.setattr(runner, "run_task", run_task)
    tasks = [t for t in load_tasks() if t.id in ("need-time", "scale-time-tokyo", "chat-greeting", "scale-db-top")]
    outcomes = runner.run(["defaults", "raw"], tasks, lambda config: [False], "http://model", tmp_path)
    assert [servers for _, servers in started] == [["everything", "files", "helpdesk", "time"], sorted(MOUNTED)] * 2
    assert ran == [("mcp.json", "chat-greeting"), ("mcp.json", "need-time"),
                   ("mcp-catalogue.json", "scale-time-tokyo"), ("mcp-catalogue.json", "scale-db-top")] * 2
    assert len(outcomes) == 8 and {o.config for o in outcomes} == {"defaults", "raw"}
