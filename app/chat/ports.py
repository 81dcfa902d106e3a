"""The tool loop's boundary: what it is given (an upstream that streams, the tools of one request, its
options) and what it fills in (the request's stats). The upstream client and the MCP pool implement these
Protocols; tests implement them with plain Python (tests/chat/loop/test_loop.py)."""

import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Literal, Protocol, Required, TypedDict

from app.chat.asking import Answer, FormValue, Grant, Reply
from app.openai.accumulate import ToolCall, Usage
from app.openai.result_format import RenderOptions
from app.openai.wire import ChatBody, FunctionDefinition, JSONObject, JSONValue, Message, Tool


class ChatUpstream(Protocol):
    def stream_chat(
        self, body: ChatBody
    ) -> AbstractAsyncContextManager[AsyncIterator[list[JSONObject]]]:
        """The answer's chunks, in batches: those that arrived together."""


class ImagePart(Protocol):
    @property
    def mime_type(self) -> str: ...

    @property
    def data(self) -> str: ...


class ToolOutput(Protocol):
    @property
    def content(self) -> str: ...

    @property
    def is_error(self) -> bool: ...

    @property
    def images(self) -> Sequence[ImagePart]: ...

    @property
    def retryable(self) -> bool: ...

    @property
    def data(self) -> JSONValue:
        """The result's structured content, or its text: what the client's trace shows."""
        ...

    @property
    def error_message(self) -> str | None: ...

    @property
    def shown(self) -> Sequence[ImagePart | str]:
        """What the result addresses to the person (images, text meant for the user only), in order."""
        ...

    @property
    def input_needed(self) -> "InputNeeded | None":
        """The server's questions when the call cannot finish without the person's answers (MCP 2026-07-28's
        `input_required`); None for a finished call."""
        ...


@dataclass(frozen=True)
class InputNeeded:
    """A call's `InputRequiredResult` as plain JSON: kept while the person answers, on any replica."""

    requests: dict[str, JSONObject]  # the server's opaque key: its elicitation request's params, as JSON
    state: str | None  # the server's sealed request state, sent back with the answers


class ElicitAnswer(TypedDict, total=False):
    """The person's answer to a server's question, as MCP's ElicitResult in JSON."""

    action: Required[Literal["accept", "decline", "cancel"]]
    content: dict[str, FormValue]  # the form's values by property name (accept)


@dataclass(frozen=True)
class ToolAnswers:
    """What a call is sent again with: the person's answers to its questions, and the server's state."""

    responses: dict[str, ElicitAnswer]  # the same keys as the questions
    state: str | None


ProgressReport = Callable[[float, float | None, str | None], Awaitable[None]]


# A tool a server runs as an MCP task (app/mcp/tasks.py) may outlive the request that called it: its result tells the
# model so, with this mark; a later turn finds the mark in the history memory gives back and asks the server again,
# with the task's state in ToolAnswers (`TaskMark.state`), until the mark says the task ended.
TASK_STATE, CANCEL_STATE, ANSWER_STATE = "toolbridge-task:", "toolbridge-task-cancel:", "toolbridge-task-answer:"
TaskAsk = Literal["follow", "cancel", "answer"]
_TASK_MARK = re.compile(r"\[background task ([A-Za-z0-9._~-]{1,64})/([A-Za-z0-9._:~-]{1,128}): (working|input_required"
                        r"|completed|failed|cancelled)\]")
TASK_ENDED = frozenset({"completed", "failed", "cancelled"})


@dataclass(frozen=True)
class TaskMark:
    """Which task of which server a tool result speaks of, and what the task was doing then."""

    server: str
    task_id: str
    status: str

    def __str__(self) -> str:
        return f"[background task {self.server}/{self.task_id}: {self.status}]"

    @property
    def state(self) -> str:
        """What a call is sent with to ask the server about the task again (live.py)."""
        return f"{TASK_STATE}{self.task_id}"

    @property
    def cancel_state(self) -> str:
        """What a call is sent with to have the server cancel the task."""
        return f"{CANCEL_STATE}{self.task_id}"

    @staticmethod
    def found_in(text: str) -> "list[TaskMark]":
        return [TaskMark(*match.groups()) for match in _TASK_MARK.finditer(text)]


def task_of(state: str | None) -> tuple[str, TaskAsk] | None:
    """The task id a call's state is about, and what it asks: how the task does, to cancel it, or to take the
    person's answers to its questions (ANSWER_STATE: the state its questions were asked with); None for any other."""
    kinds: tuple[tuple[str, TaskAsk], ...] = (("toolbridge-task:", "follow"), (CANCEL_STATE, "cancel"),
                                              (ANSWER_STATE, "answer"))
    for prefix, kind in kinds:
        if state is not None and state.startswith(prefix):
            return state[len(prefix):], kind
    return None


class RequestTools(Protocol):
    """The MCP tools of one request, fixed for its whole life: a tool list that changes meanwhile
    reaches the next request, so the model is never offered one list and called with another."""

    @property
    def openai_tools(self) -> Sequence[Tool]: ...

    @property
    def memo(self) -> MutableMapping[str, object]:
        """What is worked out from these tools once (the tool budget's ranking data, offer/tool_ranking.py): kept
        with the catalogue they come from, and shared with its other parts."""
        ...

    async def call_tool(self, name: str, arguments: str, on_progress: ProgressReport | None = None,
                        answers: ToolAnswers | None = None) -> ToolOutput:
        """Runs one call; with `answers`, the same call again with the person's answers to its questions. A
        failure is an error output for the model; raised (GatewayError) only what ends the request: its key was
        taken out of the keys file."""
        ...

    def only(self, names: frozenset[str], order: Sequence[str] = ()) -> "RequestTools":
        """The same tools, less those not named; offered in `order` where it names them."""
        ...

    def asks_first(self, name: str) -> bool:
        """Whether a call of this tool waits for the person's yes (TOOLBRIDGE_CONFIRM, mcp.json's `confirm`);
        False for a name the request does not offer."""
        ...

    def server_of(self, name: str) -> str | None:
        """The name of the MCP server the tool belongs to, as mcp.json names it; None for an unknown name."""
        ...

    def definition_change(self, name: str) -> str | None:
        """How the tool's definition differs from the one pinned when it was first seen (a diff), or None: a changed
        tool asks before every call, whatever the person's grants."""
        ...

    def servers(self) -> dict[str, str]:
        """Each offered tool's MCP server (`server_of`), by the tool's name, in the order offered: asked once for
        the whole list."""
        ...


@dataclass(frozen=True)
class ToolSelection:
    """Which MCP tools a request may be offered, as its user chose (`toolsets.py`): a tool must match every
    `include` set, by its server's name or its name as offered, and none of `exclude`. Empty: all of them."""

    include: tuple[frozenset[str], ...] = ()
    exclude: frozenset[str] = frozenset()

    def admits(self, name: str, server: str) -> bool:
        names = {name, server}
        return all(names & wanted for wanted in self.include) and not names & self.exclude

    def admits_server(self, server: str) -> bool:
        """Whether the server's prompts and resources (its `read_resource` tool too) are offered: the choice names
        the server itself. A choice of some of its tools takes those tools alone."""
        return self.admits(server, server)


ALL_TOOLS = ToolSelection()


@dataclass(frozen=True)
class BudgetChoice:
    """The tools a request offers when the tool budget leaves some out (`tool_budget.py`)."""

    kept: frozenset[str]  # names offered: MCP tools, and the client's
    withheld: tuple[str, ...]  # names left out, best first
    scores: dict[str, float]  # relevance to the conversation, of each tool ranked
    # Why some were left out: "tool_budget" (past TOOLBRIDGE_TOOL_BUDGET), "context" (past the context's share),
    # "unmatched" (matching none of the user's words, past the floor).
    reasons: tuple[str, ...] = ()
    # The client's tools as they are to be sent, when they were made smaller to leave room (tool_budget.py).
    compacted_client_tools: tuple[Tool, ...] | None = None
    # The tools kept, most relevant first, when TOOLBRIDGE_TOOL_ORDER=relevance ranks them; empty: as configured.
    order: tuple[str, ...] = ()
    # Kept whatever their score: called earlier in the conversation, or named by the user.
    pinned: frozenset[str] = frozenset()


class DescribedTool(TypedDict, total=False):
    """A tool as `/tools` lists it: as offered (`type`, `function`), the MCP server and tool it maps to, and what the
    listing adds for a request (its relevance, whether it is offered and where, a client's own)."""

    type: Required[str]
    function: Required[FunctionDefinition | None]  # None: a client's tool of another type
    server: str
    tool: str
    asks_first: bool
    original_description: str  # the server's, where the model is offered it shortened
    original_parameters: object  # the server's schema, before the profile's rewrite, listed as it came
    client: bool
    score: float
    offered: bool
    position: int


class ToolRunner(Protocol):
    def tools_for_request(
        self, offered: bool, client_tools: frozenset[str], selection: ToolSelection = ALL_TOOLS
    ) -> RequestTools: ...


@dataclass(frozen=True)
class WaitingTurn:
    """A round held for the person's yes (approvals.py), restored as the history's last assistant message
    with its calls; the person's reply follows it."""

    key: str  # where memory keeps it; claimed once, so that a yes sent twice runs the calls once
    calls: tuple[ToolCall, ...]
    asks: frozenset[str]  # the ids of the calls that wait for the yes (or an answer); the others need none
    asked_at: float  # seconds since the epoch
    # Calls that ran and came back with the server's questions (by call id): the reply is their answer.
    inputs: Mapping[str, InputNeeded] = field(default_factory=dict)
    asked_again: int = 0  # answers to the questions that did not fit, each asked about again


@dataclass(frozen=True)
class RestoredHistory:
    """A client's history with earlier turns' MCP calls and results given back (`memory.py`)."""

    messages: list[Message]
    restored_results: list[int]  # where the `tool` messages given back are, oldest first
    turns: int  # assistant turns that got their calls back
    waiting: WaitingTurn | None = None  # the last turn waits for the person's reply, which ends the history


class TurnMemory(Protocol):
    """What the loop asks of conversation memory: give a history back its earlier turns' calls (and the
    prompts their slash lines ran), fit them into the context, and remember what this request did."""

    async def restore(self, messages: Sequence[Message],
                      context_tokens: Callable[[], Awaitable[int]] | None = None) -> RestoredHistory: ...

    def fit(self, history: RestoredHistory, allowance: int) -> Sequence[Message]: ...

    async def remember_turn(self, rounds: list[Message], final_content: str, shown: str,
                            prompt: Sequence[Message] = ()) -> None: ...

    async def remember_mixed_turn(
        self, rounds: list[Message], assistant: Message, results: list[Message],
        client_call_ids: list[str], prompt: Sequence[Message] = (),
    ) -> None: ...

    async def remember_waiting_turn(
        self, rounds: list[Message], assistant: Message, asks: list[str], shown: str,
        prompt: Sequence[Message] = (), *, servers: Mapping[str, str | None] | None = None,
        reference: str = "", after: Sequence[Message] = (), inputs: Mapping[str, InputNeeded] | None = None,
        continues: bool = False,
    ) -> None: ...

    async def remember_reply(self, messages: Sequence[Message], text: str) -> None:
        """The gateway answered the message that ends `messages` itself: the next request leaves both out."""
        ...

    async def verdict(self, waiting: WaitingTurn) -> Reply | None:
        """YES or NO when the person decided the waiting turn on the status page; None when not."""
        ...

    async def claim(self, waiting: WaitingTurn) -> bool:
        """True the first time a waiting turn is resumed, False after: its calls run once."""
        ...

    async def granted(self, calls: Sequence[ToolCall], server_of: Callable[[str], str | None]) -> dict[str, Grant]:
        """By call id, the grant that decides each call one covers (yes or no without asking); the others ask."""
        ...

    async def grant(self, answer: Answer, asked: Sequence[ToolCall], server_of: Callable[[str], str | None]) -> None:
        """The answer that ends the history holds beyond these calls, as far as it says (none: these calls only)."""
        ...


class ReplyMemory(Protocol):
    """What a slash command the gateway answers itself asks of memory: to know its answer again."""

    async def remember_reply(self, messages: Sequence[Message], text: str) -> None: ...


@dataclass
class RequestStats:
    """Filled in by the tool loop while a request runs; read by the request log line at its end."""

    rounds: int = 0
    tools_called: list[str] = field(default_factory=list)
    usage: Usage | None = None
    restored_turns: int = 0
    prompt: str | None = None  # the MCP prompt a slash command ran (its command, not what the user wrote)
    answered_by_gateway: bool = False  # a slash command the gateway answered without the model
    tools_offered: int = 0
    tools_withheld: int = 0


@dataclass(frozen=True)
class LoopOptions:
    """What one request makes of the loop; `loop_options.py` reads it from the settings and the request."""

    max_tool_rounds: int
    system_hint: str | None = None
    sees_images: Callable[[], Awaitable[bool]] | None = None  # asked only once a tool returned an image
    offer_tools: bool = True
    tool_selection: ToolSelection = ALL_TOOLS
    # The tools to offer when the budget leaves some out: (history, MCP tools, client tools) -> choice, or None.
    tool_budget: Callable[[list[Message], RequestTools, Sequence[Tool]], Awaitable[BudgetChoice | None]] | None = None
    # The model's context window in tokens, asked only when earlier turns' results were restored.
    context_tokens: Callable[[], Awaitable[int]] | None = None
    # A slash command's prompt messages, standing in for the last user message (slash_commands.py).
    prompt_messages: tuple[Message, ...] = ()
    confirm_timeout: float = 3600.0  # seconds a call waits for the person's yes (TOOLBRIDGE_CONFIRM_TIMEOUT)
    # Told the model beside the system hint: the servers whose tools wait for a sign-in (offer/missing_servers.py).
    sign_in_note: str | None = None
    # TOOLBRIDGE_TOOL_DISCOVERY=find_tools: how its answers are written (tool_discovery.py); None: off.
    find_tools: RenderOptions | None = None


# What the chat service (service.py) needs besides the loop's ports: the upstream's facts about a model, and
# which names the MCP servers know (for the tools a request's user chose).


class ModelFacts(Protocol):
    async def supports_vision(self, model: str | None) -> bool: ...

    async def context_length(self, model: str | None) -> int | None: ...


class ChatModel(ChatUpstream, ModelFacts, Protocol):
    """The upstream as a chat request uses it: it streams answers and knows its models."""


class ToolPool(ToolRunner, Protocol):
    """The MCP tools as a chat request uses them: the tools of the request, and the names a user may choose."""

    def knows(self, name: str) -> bool:
        """Whether `name` is a server's name or a tool's name as offered."""
        ...


class SignInWaits(Protocol):
    """The servers a caller may use that wait for a person's sign-in (OAuth) before their tools are offered."""

    def servers_needing_sign_in(self) -> list[str]: ...

    def may_sign_in(self, name: str) -> bool:
        """Whether the caller may give that sign-in (a shared server's is the operator's to give)."""
        ...
