"""The eval's tasks: files of JSON under bench/eval/tasks/, each a list of tasks.

A task: `id`, `category`, `turns` (the user's messages, in order), optionally `client_tools` (a fixture
of tools the client sends itself, such as `open_webui`), and `expect`, judged on the last turn:
- the MCP calls: `"tool"` and `"arguments"` for one call (`"tool": null`: no tool may be called), or
  `"calls"`: a list of `{"tool", "arguments"}` that must be made in that order (other calls may come
  between, such as a bad first try), or `"calls": "any"` when only the answer counts; a `"tool"` may be a
  list of alternatives, any of which is right (where a careful person could start with any of them);
- arguments are a subset: the named ones must have these values;
- the answer: `answer` (all of these words), `answer_any` (at least one), `answer_not` (none).
`{root}` in turns and arguments is the folder the filesystem server serves (see bench/eval/files/).
`servers` names the set of MCP servers the task runs against: absent, the eval's four (bench/eval/runner.py);
`"catalogue"`, the twelve recorded popular servers of bench/eval/catalogue/ (the category at scale).
"""

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

TASKS = Path(__file__).parent / "tasks"
FIXTURES = Path(__file__).parent / "fixtures"
ROOT_MARK = "{root}"


SERVER_SETS = ("standard", "catalogue")


@dataclass(frozen=True)
class ExpectedCall:
    tool: str | tuple[str, ...]  # a tuple: alternatives, any one of them is right
    arguments: dict[str, Any] = field(default_factory=dict)

    @property
    def names(self) -> tuple[str, ...]:
        return (self.tool,) if isinstance(self.tool, str) else self.tool


@dataclass(frozen=True)
class Task:
    id: str
    category: str
    turns: list[str]
    calls: list[ExpectedCall] | None  # None: any calls, or none, are fine
    answer: list[str] = field(default_factory=list)
    answer_any: list[str] = field(default_factory=list)
    answer_not: list[str] = field(default_factory=list)
    client_tools: str | None = None
    servers: str = "standard"  # one of SERVER_SETS

    def in_folder(self, root: str) -> "Task":
        """The task with `{root}` replaced by the served folder's path."""

        def put(value: Any) -> Any:
            if isinstance(value, str):
                return value.replace(ROOT_MARK, root)
            if isinstance(value, dict):
                return {key: put(item) for key, item in value.items()}
            if isinstance(value, list):
                return [put(item) for item in value]
            return value

        calls = None if self.calls is None else [ExpectedCall(c.tool, put(c.arguments)) for c in self.calls]
        return Task(self.id, self.category, put(self.turns), calls, put(self.answer), put(self.answer_any),
                    put(self.answer_not), self.client_tools, self.servers)


def load_tasks(folder: Path = TASKS) -> list[Task]:
    tasks = [_task(raw, path.name) for path in sorted(folder.glob("*.json"))
             for raw in json.loads(path.read_text(encoding="utf-8"))]
    ids = [task.id for task in tasks]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"task ids used twice: {duplicates}")
    return tasks


@cache
def client_tools(name: str | None) -> list[dict[str, Any]]:
    """The tools a client sends itself, from bench/eval/fixtures/NAME_tools.json; none for None. Read once."""
    if name is None:
        return []
    return json.loads((FIXTURES / f"{name}_tools.json").read_text(encoding="utf-8"))


def _task(raw: dict[str, Any], source: str) -> Task:
    expect = raw["expect"]
    where = f"{source}: {raw.get('id')}"
    if "calls" in expect:
        if expect["calls"] == "any":
            calls = None
        else:
            calls = [ExpectedCall(_tool(c["tool"], where), dict(c.get("arguments") or {})) for c in expect["calls"]]
            if not calls:
                raise ValueError(f"{where}: an empty calls list; say \"tool\": null for no call")
    elif "tool" in expect:
        calls = [] if expect["tool"] is None else [
            ExpectedCall(_tool(expect["tool"], where), dict(expect.get("arguments") or {}))]
    else:
        raise ValueError(f"{where}: expect needs \"tool\" or \"calls\"")
    if raw.get("client_tools") is not None and not (FIXTURES / f"{raw['client_tools']}_tools.json").exists():
        raise ValueError(f"{where}: no fixture for client tools {raw['client_tools']!r}")
    servers = raw.get("servers", "standard")
    if servers not in SERVER_SETS:
        raise ValueError(f"{where}: unknown servers {servers!r}; one of {', '.join(SERVER_SETS)}")
    return Task(raw["id"], raw["category"], list(raw["turns"]), calls, list(expect.get("answer") or []),
                list(expect.get("answer_any") or []), list(expect.get("answer_not") or []), raw.get("client_tools"),
                servers)


def _tool(value: Any, where: str) -> str | tuple[str, ...]:
    """A tool's name, or a tuple of alternatives from a list."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(name, str) for name in value):
        return value[0] if len(value) == 1 else tuple(value)
    raise ValueError(f"{where}: a tool is a name or a non-empty list of names, not {value!r}")
