"""Real clients the doors are for, driven against a real gateway over HTTP: the OpenAI Agents SDK through the
Responses door (its `Runner`, whole and streamed, with the gateway's MCP tools and with the agent's own
`@function_tool`, which the door hands back for the SDK to run). Claude Code and Codex are binaries that need
their npm packages; what they sent and got is written in docs/doors.md."""

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.conftest import Gateway
from tests.support.fake_upstream import Call, FakeUpstream, Turn

agents = pytest.importorskip("agents")

ASK = "Echo hi, please."
ANSWER = "The tool said hi."


def with_sdk(gateway: Gateway, work: Callable[[Any], Awaitable[Any]]) -> Any:
    """`work` done with the SDK's async OpenAI client on the gateway's /v1, in one event loop (the client's
    connections belong to it); no traces are sent anywhere."""
    import openai

    agents.set_tracing_disabled(True)

    async def run() -> Any:
        async with openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key="sk-client-secret", max_retries=0) as sdk:
            return await work(sdk)

    return asyncio.run(run())


def responses_agent(client: Any, **options: Any) -> Any:
    return agents.Agent(name="helper", instructions="Be brief.",
                        model=agents.OpenAIResponsesModel(model="m", openai_client=client), **options)


def script_echo(upstream: FakeUpstream) -> None:
    upstream.script(Turn(calls=[Call("basic__echo", {"text": "hi"})]), Turn(content=ANSWER))


def test_runner_answers_after_the_gateways_mcp_tool(gateway: Gateway, upstream: FakeUpstream) -> None:
    script_echo(upstream)
    result = with_sdk(gateway, lambda sdk: agents.Runner.run(responses_agent(sdk), ASK))
    assert result.final_output == ANSWER
    assert [item.type for item in result.new_items] == ["reasoning_item", "tool_call_item", "message_output_item"]
    call = result.new_items[1].raw_item
    assert (call.type, call.name, call.server_label) == ("mcp_call", "basic__echo", "toolbridge")
    assert "echo: hi" in (call.output or "")
    assert len(upstream.chat_requests()) == 2  # one run of the SDK, the gateway's two rounds


def test_streamed_runner_gets_the_mcp_call_and_the_answer(gateway: Gateway, upstream: FakeUpstream) -> None:
    script_echo(upstream)

    async def run(sdk: Any) -> tuple[Any, list[str]]:
        streamed = agents.Runner.run_streamed(responses_agent(sdk), ASK)
        kinds = [event.data.type async for event in streamed.stream_events() if event.type == "raw_response_event"]
        return streamed.final_output, kinds

    final, kinds = with_sdk(gateway, run)
    assert final == ANSWER
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.mcp_call.completed" in kinds and "response.output_text.delta" in kinds


def test_the_default_model_goes_through_the_responses_door(gateway: Gateway, upstream: FakeUpstream) -> None:
    script_echo(upstream)

    async def run(sdk: Any) -> Any:
        agents.set_default_openai_client(sdk, use_for_tracing=False)
        return await agents.Runner.run(agents.Agent(name="helper", model="m"), ASK)

    result = with_sdk(gateway, run)
    assert result.final_output == ANSWER
    assert result.raw_responses[0].response_id.startswith("resp_")


def test_the_agents_own_tool_is_handed_back_and_its_result_finishes_the_answer(
    gateway: Gateway, upstream: FakeUpstream,
) -> None:
    ran: list[str] = []

    @agents.function_tool
    def lucky_number(name: str) -> str:
        """The lucky number of a person."""
        ran.append(name)
        return f"{name}'s lucky number is 7"

    upstream.script(Turn(calls=[Call("lucky_number", {"name": "Ada"})]), Turn(content="Ada's is 7."))
    result = with_sdk(gateway, lambda sdk: agents.Runner.run(responses_agent(sdk, tools=[lucky_number]),
                                                             "Ada's lucky number?"))
    assert ran == ["Ada"] and result.final_output == "Ada's is 7."
    assert [item.type for item in result.new_items] == ["tool_call_item", "tool_call_output_item",
                                                        "message_output_item"]
    first, second = upstream.chat_requests()
    assert {tool["function"]["name"] for tool in first["tools"]} >= {"lucky_number", "basic__echo"}
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["content"] == "Ada's lucky number is 7"


def test_a_next_turn_from_to_input_list_sends_the_mcp_call_back_and_is_answered(
    gateway: Gateway, upstream: FakeUpstream,
) -> None:
    async def two_turns(sdk: Any) -> tuple[list[Any], Any]:
        agent = responses_agent(sdk)
        first = await agents.Runner.run(agent, ASK)
        sent_back = [*first.to_input_list(), {"role": "user", "content": "Thanks. Say bye."}]
        upstream.script(Turn(content="Bye."))
        return sent_back, await agents.Runner.run(agent, sent_back)

    script_echo(upstream)
    sent_back, second = with_sdk(gateway, two_turns)
    assert {"reasoning", "mcp_call"} <= {item.get("type") for item in sent_back}
    assert second.final_output == "Bye."
    messages = upstream.chat_requests()[0]["messages"]
    # the mcp_call item is left out, and memory gives the model the call and its result back
    assert [message["role"] for message in messages][-4:] == ["assistant", "tool", "assistant", "user"]
    assert "echo: hi" in messages[-3]["content"] and messages[-1]["content"] == "Thanks. Say bye."
