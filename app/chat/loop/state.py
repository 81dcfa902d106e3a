"""What one request's rounds carry from one to the next, and the history the model is sent. Where it starts: the
client's history restored (or cleaned of our traces), a round that waited for the person's yes taken up, the tools
fitted into the tool budget, the first request built (its instructions in one first system message, with the system
hint), and the background tasks earlier turns started asked about. After each round: its calls and results (and the
images they returned) added to the history, and this request's rounds as memory keeps them."""

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from app.chat.answer import strip_trace
from app.chat.events import ToolsRan
from app.chat.loop.background import asks_to_cancel, followed, running_tasks, tells_an_end
from app.chat.loop.decision import CallKey
from app.chat.loop.held import Held, held_round
from app.chat.offer import find_tools_offer, prompt_allowance
from app.chat.ports import (
    ChatUpstream,
    ImagePart,
    LoopOptions,
    RequestStats,
    RequestTools,
    RestoredHistory,
    ToolOutput,
    ToolRunner,
    TurnMemory,
)
from app.chat.turn import Turn
from app.openai.accumulate import ToolCall
from app.openai.schemas import image_part
from app.openai.wire import ChatBody, Content, ContentPart, Message, Tool, tool_name
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
    followed: ToolsRan | None = None  # the background tasks asked about before the first round (the trace's)

    @property
    def follow_asks(self) -> bool:
        """A background task asked the person a question: the response asks it, before any round."""
        return self.followed is not None and any(o.input_needed is not None for o in self.followed.outputs)

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
    running = running_tasks(history) if held is None else []  # background tasks earlier turns started
    every_tool = mcp_tools
    if options.prompt_messages and held is None:  # after the memory read the history as the client keeps it
        history = replace(history, messages=[*history.messages[:-1], *options.prompt_messages])
    mcp_tools, client_tools = await _within_budget(history.messages, mcp_tools, list(turn.client_tools), options,
                                                   stats)
    request = first_request(turn.sent, mcp_tools.openai_tools, client_tool_names, client_tools)
    # A withheld client tool the model calls anyway still goes back to the client.
    offered_names = client_tool_names | {tool["function"]["name"] for tool in mcp_tools.openai_tools}
    messages = await _first_messages(request, history, mcp_tools, options, memory)
    first_count = len(messages)
    followed_round = None
    if running:  # asked about before the first round, as a round of this turn's
        added, followed_round = await followed(running, every_tool,
                                               cancel=asks_to_cancel(turn.messages[-1] if turn.messages else None))
        if not any(output.input_needed is not None for output in followed_round.outputs):
            messages += added  # else a task asks the person first (driver.py): memory keeps the round then
            if not any(tells_an_end(output.content) for output in followed_round.outputs):
                first_count = len(messages)  # "still running" is for this turn alone: memory keeps only an end
    return LoopState(Offer(mcp_tools, client_tool_names, offered_names), request, messages, first_count, held=held,
                     followed=followed_round)


async def _within_budget(
    messages: list[Message], mcp_tools: RequestTools, client_tools: list[Tool], options: LoopOptions,
    stats: RequestStats,
) -> tuple[RequestTools, list[Tool]]:
    """The MCP tools and client tools to offer: all of them, unless the tool budget leaves some out."""
    choice = None
    if options.tool_budget is not None and mcp_tools.openai_tools:
        choice = await options.tool_budget(messages, mcp_tools, client_tools)
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


def first_request(
    body: ChatBody, offered: Sequence[Tool], client_tool_names: set[str],
    client_tools: list[Tool],
) -> ChatBody:
    request = body.copy()
    # A client tool keeps its name. The pool already renamed ours away from the client's; one that still
    # clashes (a runner that did not) is left out rather than sent twice.
    mcp_tools = [tool for tool in offered if tool.get("function", {}).get("name") not in client_tool_names]
    if mcp_tools or client_tools != (body.get("tools") or []):  # the budget may have left out or compacted some
        request["tools"] = [*client_tools, *mcp_tools]
        if not request["tools"]:  # the budget left nothing: no empty list, which some servers refuse
            del request["tools"]
            request.pop("tool_choice", None)
    # A client that does not stream gets whole upstream answers: one JSON read instead of a chunk
    # per token. Streamed, usage is summed over every round, so it is asked for either way.
    if body.get("stream"):
        request["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
    return request


def without_traces(messages: Sequence[Message]) -> RestoredHistory:
    """Without memory: the history with our traces removed, nothing given back."""
    cleaned = []
    for message in messages:
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, str) and strip_trace(content) != content:
            message = {**message, "content": strip_trace(content)}
        cleaned.append(message)
    return RestoredHistory(cleaned, [], 0)


# The roles that instruct the model. Chat templates know `system` first and nowhere else: Gemma's and
# Mistral's raise on `developer` (which OpenAI's SDKs and Codex send) and on a system message later on.
INSTRUCTING = frozenset({"system", "developer"})


def with_instructions(messages: Sequence[Message], *hints: str | None) -> list[Message]:
    """The history with every system and developer message joined, in order and a blank line apart, into one
    system message first (the history itself when it has at most one, already first and `system`), and each hint
    that is given added to it (`with_system_hint`), in order."""
    found = [index for index, message in enumerate(messages) if message.get("role") in INSTRUCTING]
    instructed = list(messages)
    if found and not (found == [0] and messages[0]["role"] == "system"):
        parts: list[ContentPart] = []
        for index in found:
            own = _parts(messages[index].get("content"))
            parts += [{"type": "text", "text": "\n\n"}, *own] if parts and own else own
        text_only = all(part.get("type") == "text" for part in parts)
        system: Message = {"role": "system",
                           "content": "".join(part.get("text", "") for part in parts) if text_only else parts}
        instructed = [system, *(message for message in messages if message.get("role") not in INSTRUCTING)]
    for hint in hints:
        if hint:
            instructed = with_system_hint(instructed, hint)
    return instructed


def _parts(content: Content) -> list[ContentPart]:
    if isinstance(content, list):
        return content
    return [{"type": "text", "text": content}] if isinstance(content, str) and content else []


def with_system_hint(messages: list[Message], hint: str) -> list[Message]:
    """The hint added once: to the client's own system message if it has one, else as a new one first."""
    first = messages[0] if messages else None
    # with_instructions made the instructions one system message first
    if first is not None and first.get("role") == "system":
        content = first.get("content")
        if isinstance(content, str):
            if hint in content:
                return messages
            return [{**first, "content": f"{content}\n\n{hint}"}, *messages[1:]]
        if isinstance(content, list):
            if any(part.get("text") == hint for part in content):
                return messages
            return [{**first, "content": [*content, {"type": "text", "text": hint}]}, *messages[1:]]
    return [{"role": "system", "content": hint}, *messages]


def round_messages(
    messages: Sequence[Message], content: str, calls: list[ToolCall], outputs: list[ToolOutput], *,
    images_seen: bool,
) -> list[Message]:
    """The history for the next round: this round's calls and their results, and the images they returned
    if the model can see them."""
    following = [*messages, assistant_message(content, calls), *tool_messages(calls, outputs)]
    images = [image for output in outputs for image in output.images]
    if images and images_seen:
        following.append(image_message(images))
    return following


def image_message(images: list[ImagePart]) -> Message:
    # Tool messages carry text only, so a vision model sees the images in a user turn right after them.
    parts: list[ContentPart] = [{"type": "text", "text": "Images returned by the tool calls above:"}]
    parts += [image_part(i.mime_type, i.data) for i in images]
    return {"role": "user", "content": parts}


def assistant_message(content: str, calls: list[ToolCall]) -> Message:
    # "" rather than null: OpenAI, LM Studio and llama.cpp take either, llama-cpp-python's server only a string.
    return {"role": "assistant", "content": content, "tool_calls": [c.to_message_part() for c in calls]}


def tool_messages(calls: list[ToolCall], outputs: list[ToolOutput]) -> list[Message]:
    return [
        {"role": "tool", "tool_call_id": call.id, "content": output.content}
        for call, output in zip(calls, outputs, strict=True)
    ]


def rounds(added: list[Message]) -> list[Message]:
    """This request's rounds as memory keeps them: calls and results, without the images shown after them."""
    return [message for message in added if message.get("role") != "user"]
