"""The eval's tasks: files of JSON under bench/eval/tasks/, each a list of tasks.

A task: `id`, `category`, `turns` (the user's messages, in order), and `expect`: the MCP tool that must be
called first (`null`: no tool may be called), argument values it must be called with (a subset), and
words the final answer must contain.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TASKS = Path(__file__).parent / "tasks"


@dataclass(frozen=True)
class Task:
    id: str
    category: str
    turns: list[str]
    tool: str | None
    arguments: dict[str, Any] = field(default_factory=dict)
    answer: list[str] = field(default_factory=list)


def load_tasks(folder: Path = TASKS) -> list[Task]:
    tasks = []
    for path in sorted(folder.glob("*.json")):
        for raw in json.loads(path.read_text(encoding="utf-8")):
            expect = raw["expect"]
            tasks.append(Task(raw["id"], raw["category"], list(raw["turns"]), expect["tool"],
                              dict(expect.get("arguments") or {}), list(expect.get("answer") or [])))
    ids = [task.id for task in tasks]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"task ids used twice: {duplicates}")
    return tasks
