"""TOOLBRIDGE_TOOL_DISCOVERY=find_tools: a catalogue past the tool budget offered in two steps.

When the budget would leave MCP tools out, the model is offered, instead of them, one gateway tool,
`find_tools` ({"need": ...}), beside the client's own tools and the MCP tools the budget always keeps (called
earlier, named by the user). Its call is answered with the few tools that best match the need, ranked by the
budget's own ranker (`choose_within`), as names and one-line descriptions; from the next round on the request
also offers their full definitions, so that the model can call them (grammar-based upstreams need them). A
found tool becomes callable only then, whatever order the round's calls ran in. What was found is ordinary
history (a call and its result), so memory and the budget of later turns (which keeps called tools) need
nothing more. A server's or a client's own `find_tools` keeps its name: the gateway's is not offered then.
"""

import json
import re
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass

import structlog

from app.chat.offer.tool_budget import budget_for, choose_within
from app.chat.offer.tool_ranking import ranking_of
from app.chat.ports import BudgetChoice, ImagePart, InputNeeded, ProgressReport, RequestTools, ToolAnswers, ToolOutput
from app.openai.result_format import RenderOptions, recorded_result
from app.openai.wire import ChatBody, FunctionDefinition, JSONObject, JSONValue, Message, Tool, tool_name

log = structlog.get_logger("toolbridge.tools")

FIND_TOOLS = "find_tools"
FOUND = 5  # tools a find answers with: few enough for a small model to choose among
SERVERS_NAMED = 12  # in the tool's description; more are counted
ONE_LINE = 120  # characters of a found tool's description in the answer
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


@dataclass(frozen=True)
class Answer:
    """What a call of find_tools returns (a `ToolOutput`)."""

    content: str
    is_error: bool
    data: JSONValue
    retryable: bool = False  # the same need finds the same tools: a repeat is answered from what the model has
    images: Sequence[ImagePart] = ()
    shown: Sequence[ImagePart | str] = ()
    input_needed: InputNeeded | None = None

    @property
    def error_message(self) -> str | None:
        return str(self.data) if self.is_error else None


def _answer(value: JSONValue, failed: bool, render: RenderOptions) -> Answer:
    return Answer(recorded_result(value, failed, False, render), failed, value)


class FindingTools:
    """The request's MCP tools behind `find_tools` (a `RequestTools`): those offered, grown by each find."""

    def __init__(self, every: RequestTools, offered: Sequence[str], render: RenderOptions) -> None:
        self.every = every
        self.render = render
        self.definitions = {tool["function"]["name"]: tool for tool in every.openai_tools}
        self.offered = list(offered)  # MCP tools offered, the latest found first
        self.pending: list[str] = []  # found, offered from the next round on
        self.narrowed = every.only(frozenset(self.offered))
        self.definition = _definition(every)
        self.behind = len(self.definitions) - len(self.offered)  # MCP tools offered only once found

    @property
    def openai_tools(self) -> Sequence[Tool]:
        return [*(self.definitions[name] for name in self.offered), self.definition]

    @property
    def memo(self) -> MutableMapping[str, object]:
        return self.every.memo

    async def call_tool(self, name: str, arguments: str, on_progress: ProgressReport | None = None,
                        answers: ToolAnswers | None = None) -> ToolOutput:
        if name == FIND_TOOLS:
            return self.find(arguments)
        return await self.narrowed.call_tool(name, arguments, on_progress, answers)

    def only(self, names: frozenset[str], order: Sequence[str] = ()) -> RequestTools:
        return self.narrowed.only(names, order)

    def asks_first(self, name: str) -> bool:
        return self.narrowed.asks_first(name)

    def server_of(self, name: str) -> str | None:
        return self.narrowed.server_of(name)

    def definition_change(self, name: str) -> str | None:
        return self.narrowed.definition_change(name)

    def servers(self) -> dict[str, str]:
        return self.narrowed.servers()

    def find(self, arguments: str) -> Answer:
        """The tools that best match the need; offered (and callable) from the next round on."""
        need = _need(arguments)
        if not need:
            return _answer('find_tools takes {"need": "..."}: the task in a few words.', True, self.render)
        ranking = ranking_of(self.every)
        choice = choose_within(ranking, [], [{"role": "user", "content": need}], budget_for(FOUND, None, False))
        order = {name: index for index, name in enumerate(ranking.names)}
        scores = {} if choice is None else choice.scores
        kept = order.keys() if choice is None else choice.kept
        found = sorted((n for n in kept if scores.get(n, 1.0) > 0), key=lambda n: (-scores.get(n, 1.0), order[n]))
        found = found[:FOUND]
        if not found:
            return _answer(f"No tool matches {need!r}: try other words.", True, self.render)
        self.pending = [*found, *(name for name in self.pending if name not in found)]
        listed: JSONObject = {name: _one_line(self.definitions[name]) for name in found}
        return _answer({"tools": listed, "next": "Call one of these tools now."}, False, self.render)

    def offer_found(self) -> list[str]:
        """The tools found since the last round, now offered first; [] when none is new."""
        new = [name for name in self.pending if name not in self.offered]
        self.pending = []
        if new:
            self.offered = [*new, *self.offered]
            self.narrowed = self.every.only(frozenset(self.offered))
        return new


def find_tools_offer(
    render: RenderOptions | None, messages: Sequence[Message], mcp_tools: RequestTools,
    client_tools: Sequence[Tool], choice: BudgetChoice | None,
) -> FindingTools | None:
    """The request's MCP tools behind find_tools, when discovery is on (`render`) and the budget left MCP tools
    out; None otherwise, and when a server's or the client's tool is called find_tools already."""
    if render is None or choice is None:  # off, or nothing left out: every request asks, most of them this
        return None
    ours = [tool["function"]["name"] for tool in mcp_tools.openai_tools]  # ours: functions all
    if not set(choice.withheld) & set(ours):
        return None
    if FIND_TOOLS in ours or FIND_TOOLS in {tool_name(tool) for tool in client_tools}:
        owner = mcp_tools.server_of(FIND_TOOLS) or "the client"
        log.warning("find_tools_not_offered", why=f"a tool of {owner} is called find_tools and keeps its name")
        return None
    always = choose_within(mcp_tools.openai_tools, [], messages, budget_for(0, None, False))
    kept = set(ours) if always is None else always.kept
    offered = [name for name in ours if name in kept]
    finding = FindingTools(mcp_tools, offered, render)
    log.info("find_tools_offered", behind=finding.behind, offered=offered)
    return finding


def offer_found(
    request: ChatBody, offered_names: set[str], answered: set[tuple[str, str]], tools: RequestTools
) -> None:
    """Before a round: the tools a find answered with since the last one, offered with their definitions. A call
    of one made before it was offered got "no tool named": it is no repeat when made again (`answered`)."""
    if not isinstance(tools, FindingTools) or not (new := tools.offer_found()):
        return
    ours = {FIND_TOOLS, *tools.definitions}
    client = [tool for tool in request.get("tools") or [] if tool_name(tool) not in ours]
    request["tools"] = [*client, *tools.openai_tools]
    offered_names.update(new)
    answered.difference_update({key for key in answered if key[0] in new})


def _definition(every: RequestTools) -> Tool:
    names = [tool["function"]["name"] for tool in every.openai_tools]
    servers = list(dict.fromkeys(server for name in names if (server := every.server_of(name))))
    listed = ", ".join(servers[:SERVERS_NAMED]) + (f" and {len(servers) - SERVERS_NAMED} more"
                                                   if len(servers) > SERVERS_NAMED else "")
    description = (f"Finds the tools for a task among {len(names)} tools of these servers: {listed}. Call it with "
                   "the need in a few words; then call one of the tools it names.")
    need: JSONObject = {"type": "string", "description": "The task in a few words, e.g. \"open a web page\"."}
    return {"type": "function", "function": {"name": FIND_TOOLS, "description": description, "parameters": {
        "type": "object", "properties": {"need": need}, "required": ["need"]}}}


def _need(arguments: str) -> str:
    """The need: its own argument, else whatever text the model put in others (small models rename it)."""
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return ""
    if not isinstance(parsed, dict):
        return ""
    need = parsed.get("need")
    texts = [need] if isinstance(need, str) else [v for v in parsed.values() if isinstance(v, str)]
    return " ".join(texts).strip()


def _one_line(tool: Tool) -> str:
    function: FunctionDefinition = tool.get("function") or {"name": ""}
    text = function.get("description", "").strip()
    sentence = _SENTENCE_END.split(text.split("\n", 1)[0], maxsplit=1)[0]
    return sentence if len(sentence) <= ONE_LINE else sentence[:ONE_LINE - 1] + "…"



