"""What a request is offered, for people to look at: `GET /tools` (with a user's words) and `POST /tools` (a whole
chat body, the client's tools included), and the words that say why the tool budget left tools out (the log's
warning, the status page's recent requests)."""

from collections.abc import Sequence
from typing import Protocol, Required, TypedDict

from app.chat.offer.context_budget import wire_chars
from app.chat.offer.tool_budget import UNLIMITED, UNLIMITED_CHARS, Budget, choose_within
from app.chat.offer.tool_ranking import Rankable, ranking_of
from app.chat.ports import BudgetChoice, DescribedTool
from app.openai.wire import Message, Tool


def why_withheld(choice: BudgetChoice, budget: Budget, client_tools: Sequence[Tool]) -> str:
    """What left tools out, in words for the log and the status page."""
    said = []
    if "tool_budget" in choice.reasons:
        said.append(f"past TOOLBRIDGE_TOOL_BUDGET ({budget.max_tools} tools)")
    if "context" in choice.reasons:
        context = f"{budget.context_tokens}-token context" if budget.context_tokens else "context"
        share = f"past half of the model's {context} ({budget.max_chars} characters of tool definitions)"
        if client_tools:
            share += f"; the client's own {len(client_tools)} tools take {wire_chars(list(client_tools))}"
        said.append(share)
    if "unmatched" in choice.reasons:
        said.append("matching none of the user's words")
    if choice.compacted_client_tools is not None:
        said.append("the client's tools were sent compact to leave room")
    return "; ".join(said)


class ToolListing(TypedDict, total=False):
    """What `/tools` answers."""

    object: Required[str]
    data: Required[list[DescribedTool]]
    withheld: list[str]  # the names the budget leaves out, best first
    why: str
    client_tools_compacted: int


def describe_offer(catalogue: "Describable", query: str | None, budget: Budget | None) -> ToolListing:
    """What `GET /tools` shows: each tool with its server and MCP tool; with `query`, as a request whose user
    wrote it (and sent no tools of its own) would be offered them: each tool's relevance, and whether the
    budget keeps it."""
    described = catalogue.describe()
    if query is None:
        return {"object": "list", "data": described}
    return describe_request(catalogue, [{"role": "user", "content": query}], [], budget)


def describe_request(
    catalogue: "Describable", messages: Sequence[Message], client_tools: Sequence[Tool],
    budget: Budget | None,
) -> ToolListing:
    """What `POST /tools` shows for a whole chat request: the client's tools (marked `client`, as they would
    be sent) and the MCP tools, each with its relevance and whether it is offered; the names withheld, and
    why."""
    described = catalogue.describe()
    budget = budget or Budget(UNLIMITED, UNLIMITED_CHARS)
    # Ranked and sized as the model gets them (what /tools adds, server and originals, is not sent), from the
    # ranking data the catalogue keeps for requests.
    choice = choose_within(ranking_of(catalogue), client_tools, messages, budget, always_rank=True)
    assert choice is not None
    sent = choice.compacted_client_tools or tuple(client_tools)
    clients: list[DescribedTool] = [
        {"type": tool.get("type", "function"), "function": tool.get("function"), "client": True}
        for tool in sent]
    order = _request_order([*clients, *described], choice)
    for entry in [*clients, *described]:
        name = _name(entry)
        entry["score"], entry["offered"] = round(choice.scores.get(name, 0.0), 4), name in choice.kept
        if name in order:
            entry["position"] = order[name]
    # Listed as the request would send them, then the withheld, best first.
    listed = sorted([*clients, *described], key=lambda e: (order.get(_name(e), len(order) + 1), -e.get("score", 0)))
    answer: ToolListing = {"object": "list", "data": listed, "withheld": list(choice.withheld)}
    if choice.withheld or choice.compacted_client_tools is not None:
        answer["why"] = why_withheld(choice, budget, client_tools)
    if choice.compacted_client_tools is not None:
        answer["client_tools_compacted"] = len(choice.compacted_client_tools)
    return answer


def _request_order(entries: Sequence[DescribedTool], choice: BudgetChoice) -> dict[str, int]:
    """Each offered tool's place in the request's tool list (from 1): the client's first, as they were sent, then
    ours, most relevant first when the budget ranked them (`choice.order`), else in the configured order."""
    offered = [_name(entry) for entry in entries if _name(entry) in choice.kept]
    ranked = {name: index for index, name in enumerate(choice.order)}
    clients = [_name(entry) for entry in entries if entry.get("client") and _name(entry) in choice.kept]
    ours = sorted((name for name in offered if name not in clients), key=lambda name: ranked.get(name, len(ranked)))
    return {name: place for place, name in enumerate([*clients, *ours], start=1)}


def _name(entry: DescribedTool) -> str:
    function = entry["function"]
    return function.get("name", "") if function is not None else ""


class Describable(Rankable, Protocol):
    def describe(self) -> list[DescribedTool]: ...
