"""The chat service: one chat request, from its parsed body to the events of its answer.

The route (app/doors/chat_completions/routes.py) hands over the turn it read (`turn.py`) and what the request
needs of the app (`ChatNeeds`) and gets a `ChatReply` back: the answer's events, which it streams as server-sent
events or collects whole. Here the turn is read (trace mode, the tools its user chose, the loop's options, a slash
command, its memory) and answered by the gateway itself or by the tool loop. Written against Protocols
(app/chat/ports.py), so the service never names the upstream's HTTP client or the MCP pool.
"""

from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import Protocol

from app.chat.answer import ChatPayload, PersonView, TraceMode, collect_completion, stream_payloads, trace_mode
from app.chat.events import LoopEvent, ServersNotReady
from app.chat.loop import run_tool_loop
from app.chat.loop_options import conversation_memory, loop_options
from app.chat.memory import MemoryStores
from app.chat.offer import NotReady, ServerStarts, await_starting, choose_tools, sign_in_notes
from app.chat.ports import ChatModel, LoopOptions, RequestStats, SignInWaits, ToolPool
from app.chat.slash_commands import Answer, Expansion, PromptSource, answered, read_command, run_command
from app.chat.turn import Turn
from app.openai.wire import Completion
from app.ops.recent_requests import RecentRequests
from app.settings import Settings


class ChatPool(ToolPool, PromptSource, ServerStarts, Protocol):
    """The MCP servers as a chat request uses them: their tools, their prompts for slash commands, and their states
    while they start."""


@dataclass(frozen=True)
class ChatNeeds:
    """What a chat request needs of the app: the lifespan's resources, seen as the request's caller may use them."""

    settings: Settings
    upstream: ChatModel
    pool: ChatPool
    memory: MemoryStores | None
    stats: RequestStats  # filled in as the request runs; its log line reads it at the end
    recent: RecentRequests | None = None  # the last requests' tool offers, for the status page
    sign_ins: SignInWaits | None = None  # the caller's servers that wait for a person's sign-in
    base_url: Callable[[], str] = lambda: ""  # where the person's browser reaches the gateway, for links


@dataclass(frozen=True)
class ChatReply:
    """The answer's events, begun (the upstream accepted the request), and how the client asked to see them."""

    events: AsyncGenerator[LoopEvent, None]
    model: str | None  # as the client named it (a virtual model too), for the answer's `model`
    include_usage: bool
    trace: TraceMode
    notice: str = ""  # for the person alone, after the answer: the links to sign in to servers (missing_servers.py)

    def payloads(self, person: PersonView | None) -> AsyncGenerator[ChatPayload, None]:
        """The answer as the `data:` payloads of a stream (chunks, or one error), then DONE."""
        return stream_payloads(self.events, model=self.model, include_usage=self.include_usage, trace=self.trace,
                               person=person, notice=self.notice)

    def completion(self, person: PersonView | None) -> Awaitable[Completion]:
        """The answer as one `chat.completion` object."""
        return collect_completion(self.events, model=self.model, trace=self.trace, person=person, notice=self.notice)


async def answer_chat(turn: Turn, needs: ChatNeeds) -> ChatReply:
    """The answer to one chat request: a slash command the gateway answers itself, or the tool loop's, returned
    once it has begun (the upstream accepted the request).

    Raises:
        GatewayError: the upstream refused the first request or could not be reached.
        InvalidRequest: the trace or tools header, or the body's tool metadata, names what does not exist.
    """
    settings, caller = needs.settings, turn.caller
    trace = trace_mode(caller.trace, settings.tools.tool_trace)
    chosen = choose_tools(turn.model, turn.sent.get("metadata"), caller.tools, settings.tools.toolsets,
                          needs.pool.knows)
    turn, selection = turn.chosen(chosen), chosen.selection
    options = loop_options(settings, turn, needs.upstream, selection, needs.recent)
    missing = await await_starting(needs.pool, selection, settings.mcp.start_wait) if options.offer_tools else []
    outcome = await _slash_command(turn, options, needs)
    memory = conversation_memory(settings, needs.memory, caller)
    notice = ""
    if isinstance(outcome, Answer):
        events = answered(outcome.text, list(turn.messages), memory)
    else:
        if outcome is not None:  # the prompt's messages stand in for the slash line
            options = replace(options, prompt_messages=outcome.messages)
        note, notice = sign_in_notes(needs.sign_ins, options, turn.messages, needs.base_url)
        if note:
            options = replace(options, sign_in_note=note)
        events = run_tool_loop(turn, needs.upstream, needs.pool, options, stats=needs.stats, memory=memory)
    await _accepted(events)
    return ChatReply(_told(missing, events) if missing else events, turn.asked_model, turn.include_usage, trace,
                     notice)


async def _accepted(events: AsyncGenerator[LoopEvent, None]) -> None:
    """Waits for the answer's first event (the loop's Started, which no client sees): the upstream accepted the
    request, so that the route can still answer its failures with a real HTTP status."""
    try:
        await anext(events)
    except BaseException:
        await events.aclose()
        raise


async def _told(missing: list[NotReady], events: AsyncGenerator[LoopEvent, None]) -> AsyncGenerator[LoopEvent, None]:
    """The answer's events, after the servers it waited for in vain."""
    yield ServersNotReady([(server.server, server.why) for server in missing])
    async with aclosing(events):
        async for event in events:
            yield event


async def _slash_command(turn: Turn, options: LoopOptions, needs: ChatNeeds) -> Answer | Expansion | None:
    """The last message as a slash command (TOOLBRIDGE_PROMPT_COMMANDS): answered, expanded, or None (no
    command: the message goes to the model as typed); the request's stats say which."""
    command = read_command(list(turn.messages)) if needs.settings.mcp.prompt_commands else None
    servers = options.tool_selection.admits_server
    outcome = await run_command(command, needs.pool, options.sees_images, servers) if command is not None else None
    if isinstance(outcome, Expansion):
        needs.stats.prompt = outcome.command
    needs.stats.answered_by_gateway = isinstance(outcome, Answer)
    return outcome
