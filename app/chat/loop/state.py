"""What one request's rounds carry from one to the next, and where it starts: the client's history restored
(or cleaned of our traces), a round that waited for the person's yes taken up, the tools fitted into the tool
budget, the first request built."""

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from app.chat.loop.decision import CallKey
from app.chat.loop.held import Held, held_round
from app.chat.loop.messages import first_request, rounds, with_instructions, without_traces
from app.chat.offer import find_tools_offer, prompt_allowance
from app.chat.ports import (
    ChatUpstream,
    LoopOptions,
    RequestStats,
    RequestTools,
    RestoredHistory,
    ToolRunner,
    TurnMemory,
)
from app.chat.turn import Turn
from app.openai.wire import ChatBody, Message, Tool, tool_name
from app.ops.telemetry import Span


@dataclass(frozen=True)
class Offer:
    """The tools of the request, the same in every round."""

    mcp_tools: RequestTools
    client_tool_names: set[str]  # every client tool, the withheld too: the model may call one anyway
    offered_names: set[str]  # the names the model may print as a call into its content


@dataclass
class LoopState:
    """What the rounds of one request carry from one to the next."""

    offer: Offer
    request: ChatBody  # sent every round, its tool choice forced or released between rounds
    messages: list[Message]  # the history the model sees next
    first_count: int  # the history as the request brought it ends here; our rounds follow
    shown: list[str] = field(default_factory=list)  # the text the client is shown, which it sends back next time
    answered: set[CallKey] = field(default_factory=set)  # calls run whose result another try would not change
    answering_now: bool = False  # the model repeated answered calls and was asked to answer from what it has
    waiting_for_answer: bool = False  # the round's calls came back with the server's questions: the response ends
    held: Held | None = None  # a round that waited for the person's yes, run or refused before the first round

    def our_rounds(self) -> list[Message]:
        """This request's rounds as memory keeps them."""
        return rounds(self.messages[self.first_count:])


async def start_state(
    turn: Turn, tools: ToolRunner, options: LoopOptions, stats: RequestStats, memory: TurnMemory | None
) -> LoopState:
    """The state before the first round: the tools offered and the history the model sees first."""
    client_tool_names = _tool_names(turn.client_tools)
    mcp_tools = tools.tools_for_request(offered=options.offer_tools, client_tools=frozenset(client_tool_names),
                                        selection=options.tool_selection)
    history = (await memory.restore(turn.messages, options.context_tokens) if memory is not None
               else without_traces(turn.messages))
    stats.restored_turns = history.turns
    history, held = await held_round(history, turn.messages, memory, options.confirm_timeout,
                                     mcp_tools.server_of)
    if options.prompt_messages and held is None:  # after the memory read the history as the client keeps it
        history = replace(history, messages=[*history.messages[:-1], *options.prompt_messages])
    mcp_tools, client_tools = await _within_budget(history.messages, mcp_tools, list(turn.client_tools), options,
                                                   stats)
    request = first_request(turn.sent, mcp_tools.openai_tools, client_tool_names, client_tools)
    # A withheld client tool the model calls anyway still goes back to the client.
    offered_names = client_tool_names | {tool["function"]["name"] for tool in mcp_tools.openai_tools}
    messages = await _first_messages(request, history, mcp_tools, options, memory)
    return LoopState(Offer(mcp_tools, client_tool_names, offered_names), request, messages, len(messages), held=held)


async def _within_budget(
    messages: list[Message], mcp_tools: RequestTools, client_tools: list[Tool], options: LoopOptions,
    stats: RequestStats,
) -> tuple[RequestTools, list[Tool]]:
    """The MCP tools and client tools to offer: all of them, unless the tool budget leaves some out."""
    choice = None
    if options.tool_budget is not None and mcp_tools.openai_tools:
        choice = await options.tool_budget(messages, mcp_tools.openai_tools, client_tools, mcp_tools.servers())
    if (finding := find_tools_offer(options.find_tools, messages, mcp_tools, client_tools, choice)) is not None:
        stats.tools_withheld, choice, mcp_tools = finding.behind, None, finding
    if choice is not None:
        mcp_tools = mcp_tools.only(choice.kept, choice.order)
        sent = choice.compacted_client_tools if choice.compacted_client_tools is not None else client_tools
        client_tools = [tool for tool in sent if tool_name(tool) in choice.kept]
        stats.tools_withheld = len(choice.withheld)
    stats.tools_offered = len(mcp_tools.openai_tools) + len(client_tools)
    return mcp_tools, client_tools


async def _first_messages(
    request: ChatBody, history: RestoredHistory, mcp_tools: RequestTools,
    options: LoopOptions, memory: TurnMemory | None,
) -> list[Message]:
    """The client's history as the model should see it: earlier turns given back their MCP calls and
    results (fitted into the context), our traces removed, its system and developer messages in one system
    message first, the system hint added when there are MCP tools to read results of, and the note on servers
    whose tools wait for a sign-in when there are some."""
    messages: Sequence[Message] = history.messages
    if memory is not None and history.restored_results and options.context_tokens is not None:
        allowance = prompt_allowance(await options.context_tokens(), request, request.get("tools") or [])
        messages = memory.fit(history, allowance)
    return with_instructions(messages, options.system_hint if mcp_tools.openai_tools else None, options.sign_in_note)


def _tool_names(tools: Sequence[Tool]) -> set[str]:
    return {name for tool in tools if (name := tool_name(tool))}


@dataclass(frozen=True)
class RoundContext:
    """What the rounds of one request work with, the same in every round."""

    upstream: ChatUpstream
    options: LoopOptions
    stats: RequestStats
    memory: TurnMemory | None
    span: Span
