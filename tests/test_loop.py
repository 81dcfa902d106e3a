"""The tool loop on its own (app/loop.py), with an upstream and tools that are plain Python: what only a
controlled tool outcome can show, such as a timed-out call the model may try again."""

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from app.loop import Finished, run_tool_loop
from app.loop_options import LoopOptions

pytestmark = pytest.mark.anyio
TOOL = {"type": "function", "function": {"name": "fetch", "parameters": {"type": "object", "properties": {}}}}


@dataclass
class Outcome:
    content: str
    is_error: bool = False
    images: Sequence[Any] = ()
    retryable: bool = False


@dataclass
class Tools:
    outcomes: list[Outcome]
    calls: list[str] = field(default_factory=list)

    @property
    def openai_tools(self) -> Sequence[dict[str, Any]]:
        return [TOOL]

    def tools_for_request(self, offered: bool, client_tools: frozenset[str]) -> "Tools":
        return self

    async def call_tool(self, name: str, arguments: str, on_progress: Any = None) -> Outcome:
        self.calls.append(arguments)
        return self.outcomes.pop(0)


@dataclass
class Model:
    """Calls `fetch` with the same arguments until told not to call, then answers."""

    requests: list[dict[str, Any]] = field(default_factory=list)

    @asynccontextmanager
    async def stream_chat(self, body: dict[str, Any]) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        self.requests.append(body)
        if body.get("tool_choice") == "none":
            delta: dict[str, Any] = {"content": "answer"}
            finish = "stop"
        else:
            call = {"index": 0, "id": f"c{len(self.requests)}", "type": "function",
                    "function": {"name": "fetch", "arguments": '{"page": 1}'}}
            delta, finish = {"tool_calls": [call]}, "tool_calls"

        async def chunks() -> AsyncIterator[dict[str, Any]]:
            yield {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        yield chunks()


async def run(tools: Tools, model: Model) -> Finished:
    body = {"model": "m", "messages": [{"role": "user", "content": "go"}]}
    events = [event async for event in run_tool_loop(body, model, tools, LoopOptions(max_tool_rounds=5))]
    assert isinstance(events[-1], Finished)
    return events[-1]


async def test_a_call_that_timed_out_may_be_tried_again_and_its_repeat_after_success_is_not() -> None:
    tools = Tools([Outcome("timed out", is_error=True, retryable=True), Outcome("page one")])
    model = Model()
    finished = await run(tools, model)
    assert finished.finish_reason == "stop"
    assert tools.calls == ['{"page": 1}', '{"page": 1}']  # the retry ran; the third, identical call did not
    assert [r.get("tool_choice") for r in model.requests] == [None, None, None, "none"]


async def test_a_call_that_failed_for_good_is_not_run_again() -> None:
    tools = Tools([Outcome("no such page", is_error=True)])
    model = Model()
    await run(tools, model)
    assert tools.calls == ['{"page": 1}']
    assert [r.get("tool_choice") for r in model.requests] == [None, None, "none"]
