"""The tool budget: past it, a request is offered only the tools most relevant to its conversation.

Small models choose worse from long lists, and tool definitions take context before the user has said
anything. When a request would offer more than TOOLBRIDGE_TOOL_BUDGET MCP tools, or its tools'
definitions would take more than half of the model's context (as the upstream reports it, or
TOOLBRIDGE_CONTEXT_TOKENS), the MCP tools are ranked by BM25 (`bm25s`) over their names, descriptions and
parameter names against the recent user turns, and the best are kept (ties in the configured order; tools that
match nothing only when nothing does). Tools called earlier in the conversation and tools the user names are
always kept.
What a tool and a request are found by (split names, server words, synonyms, stems) is tool_words.py's.
The kept tools are offered in the configured order (the same from turn to turn while the same tools are kept, so
the upstream's prompt cache holds), or most relevant first with TOOLBRIDGE_TOOL_ORDER=relevance. A follow-up that
stays on its conversation's subject is offered what the request before it was, in the same order
(`choose_in_conversation`): its words alone would pick a different few, and the model server would process every
token from the tools on again.

The client's tools are never dropped, but their size counts, and they must not leave ours nothing: Open
WebUI's 36 take more than half of an 8k context alone, which once withheld every MCP tool. So the
TOOLBRIDGE_MIN_MCP_TOOLS most relevant MCP tools are offered whatever the room, and when the client's tools
and those do not fit together, the client's tools are sent compact (`compact_tool`, below). With
TOOLBRIDGE_RANK_CLIENT_TOOLS they are ranked with ours instead, and the budget counts them too.

Only the user's own words are read: of a user message longer than RANKED_CHARS, its start and its end (a
pasted document sits between what the user asks), and names in the most recent NAMED_CHARS of them; both
in linear time, so that a 40 MB message costs no more than a short one.

Compact client tools: Open WebUI sends 36 tools (about 23,000 characters as JSON) with every chat, more than half
of an 8k-token context by themselves. Most of that is prose: a description of usage notes, and a description on every
parameter. A compact tool keeps everything a call depends on (its name, the parameters' names, types, enums,
required list and structure) and its description's first sentence; parameter descriptions go. The client still gets
the calls the model makes by the same name, and runs them as before.
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.chat.offer.context_budget import CHARS_PER_TOKEN, wire_chars
from app.chat.offer.tool_ranking import NAME_WORD, ToolFacts, ToolIndex, client_facts, list_chars, tool_facts, words_of
from app.chat.offer.tool_words import request_words
from app.chat.ports import BudgetChoice
from app.openai.schemas import content_text
from app.openai.wire import JSONObject, JSONValue, Message, Tool, tool_name

UNLIMITED = 1_000_000  # TOOLBRIDGE_TOOL_BUDGET=0: no count limit; the context's share still holds
UNLIMITED_CHARS = 1 << 40
CONTEXT_SHARE = 0.5  # of the model's context, at most, for tool definitions (when the upstream says what it is)
RECENT_USER_TURNS = 2
RANKED_CHARS = 16_000  # of each user message: its first and last half of this (ranking 10 MB took 13 s)
NAMED_CHARS = 200_000  # of the recent user messages (so cut), where a tool's name pins it
# A follow-up keeps the request before's tools when every tool its words match at least this share of the best match
# was among them. Over the eval's 9 follow-ups at scale: 4 keep them (1 had the same tools before) and all 9 are
# offered a tool their task needs; 0.5 keeps 2, and taking only the best match kept 6 but lost one such tool.
SAME_SUBJECT = 0.7


@dataclass(frozen=True)
class Budget:
    max_tools: int
    max_chars: int
    rank_client_tools: bool = False
    min_mcp_tools: int = 0  # offered whatever the room: the client's tools never leave the MCP side empty
    context_tokens: int | None = None  # what max_chars was taken from, to say why tools were left out
    relevance_order: bool = False  # the kept tools offered most relevant first (TOOLBRIDGE_TOOL_ORDER=relevance)


def budget_for(max_tools: int, context_tokens: int | None, rank_client_tools: bool, min_mcp_tools: int = 0, *,
               relevance_order: bool = False) -> Budget:
    """The budget for a model whose context is `context_tokens` (None: not known, so only the count holds)."""
    max_chars = UNLIMITED_CHARS if context_tokens is None else int(context_tokens * CONTEXT_SHARE * CHARS_PER_TOKEN)
    return Budget(max_tools, max_chars, rank_client_tools, min(min_mcp_tools, max_tools), context_tokens,
                  relevance_order)


def choose_within(
    mcp_tools: "Sequence[Tool] | ToolIndex", client_tools: Sequence[Tool], messages: Sequence[Message],
    budget: Budget, *, always_rank: bool = False, servers: Mapping[str, str] | None = None,
) -> BudgetChoice | None:
    """The tools to offer, when the budget leaves some out or the client's tools must be made compact (None when
    everything fits, unless `always_rank`: people look at every score). `mcp_tools`: the request's MCP tools, their
    ranking data worked out (tool_ranking.py) or, for a list no catalogue keeps, as they are, with `servers`, each
    MCP tool's server's name."""
    ours = mcp_tools if isinstance(mcp_tools, ToolIndex) else _worked_out(mcp_tools, client_tools, budget,
                                                                          always_rank, servers or {})
    if ours is None:
        return None
    ranking = ours.after(client_facts(client_tools, ours.servers)) if budget.rank_client_tools and client_tools \
        else ours
    facts, names = ranking.facts, ranking.names
    fixed = [] if budget.rank_client_tools else list(client_tools)
    fixed_facts = [tool_facts(tool, None, ()) for tool in fixed]
    fits = len(facts) <= budget.max_tools and (
        budget.max_chars >= UNLIMITED_CHARS or list_chars([*fixed_facts, *facts]) <= budget.max_chars)
    if fits and not always_rank:
        return None
    scores = ranking.scores(_words(request_words(_query(messages))))
    pinned = _called(messages) | (named := _named(facts, _user_texts(messages)))
    order = _best_first(names, scores, pinned)
    floor = set([names[i] for i in order if names[i] in ours.name_set][: budget.min_mcp_tools])
    # The floor is offered first; the client's tools take what is left, made compact when they do not fit in it.
    compacted = None
    room = budget.max_chars - list_chars([facts[i] for i in order if names[i] in floor or names[i] in pinned])
    if fixed and list_chars(fixed_facts) > room:
        fixed = list(compacted := tuple(compact_tool(tool) for tool in fixed))
        fixed_facts = [tool_facts(tool, None, ()) for tool in fixed]
    kept, reasons = _fill(facts, order, scores if not fits else None, pinned | floor, budget.max_tools,
                          budget.max_chars - list_chars(fixed_facts))
    withheld = tuple(names[i] for i in order if names[i] not in kept)
    if not withheld and compacted is None and not always_rank:
        return None
    offered = _most_relevant_first(names, scores, named, kept) if budget.relevance_order else ()
    return BudgetChoice(frozenset(kept) | {tool_name(t) for t in fixed}, withheld,
                        dict(zip(names, scores, strict=True)), tuple(sorted(reasons)), compacted,
                        offered if withheld or compacted is not None else (), frozenset(pinned))


def choose_in_conversation(mcp_tools: "Sequence[Tool] | ToolIndex", client_tools: Sequence[Tool],
                           messages: Sequence[Message], budget: Budget, *,
                           servers: Mapping[str, str] | None = None) -> BudgetChoice | None:
    """choose_within's choice; or, for a follow-up that stays on its conversation's subject, what the request before
    it was offered, in the same order. The model server's prompt cache (LM Studio, llama.cpp) then holds everything
    up to the new turn: on CPU a follow-up's first token came in 0.14 s instead of 13 s (bench.prompt_cache). The
    follow-up stays on its subject when the tools it keeps whatever their score (called before, named now) and those
    its words match nearly as well as the best (SAME_SUBJECT) were all offered before, or when its words match no tool
    ("thanks!"). Otherwise it gets the tools its words call for, as a first turn does: "Is that crawl finished yet?"
    after "Crawl https://blog.acme.dev" needs firecrawl_check_crawl_status, which the first turn was not offered."""
    now = choose_within(mcp_tools, client_tools, messages, budget, servers=servers)
    earlier = earlier_request(messages)
    if now is None or earlier is None:
        return now
    before = choose_within(mcp_tools, client_tools, earlier, budget, servers=servers)
    return before if before is not None and _stays_on(before, now) else now


def earlier_request(messages: Sequence[Message]) -> Sequence[Message] | None:
    """The messages the conversation's request before this one sent: up to its user message before the last (the
    history as the gateway read it then, earlier turns restored alike). None for a conversation's first request."""
    users = [index for index, message in enumerate(messages) if message.get("role") == "user"]
    return messages[: users[-2] + 1] if len(users) > 1 else None


def _stays_on(before: BudgetChoice, now: BudgetChoice) -> bool:
    if not now.pinned <= before.kept:
        return False
    scores = {name: now.scores.get(name, 0.0) for name in now.kept}
    best = max(scores.values(), default=0.0)
    return best <= 0 or all(name in before.kept for name, score in scores.items() if score >= SAME_SUBJECT * best)


def _worked_out(mcp_tools: Sequence[Tool], client_tools: Sequence[Tool], budget: Budget, always_rank: bool,
                servers: Mapping[str, str]) -> ToolIndex | None:
    """The ranking data of tools no catalogue keeps, worked out now; None for a list that fits, which needs none."""
    if not always_rank and all_fit(mcp_tools, client_tools, budget):
        return None
    return ToolIndex.of(mcp_tools, servers)


def all_fit(mcp_tools: Sequence[Tool], client_tools: Sequence[Tool], budget: Budget) -> bool:
    """Whether the budget keeps every tool as it is, weighed without ranking data: a list that fits needs none."""
    fixed = [] if budget.rank_client_tools else list(client_tools)
    ranked = [*client_tools, *mcp_tools] if budget.rank_client_tools else list(mcp_tools)
    return len(ranked) <= budget.max_tools and _fits([*fixed, *ranked], budget.max_chars)


def _best_first(names: Sequence[str], scores: Sequence[float], pinned: set[str]) -> list[int]:
    """The tools' places, pinned ones first, then the most relevant, ties in the configured order: a stable sort by
    score alone, then the pinned taken to the front (a key of (pinned, score, place) a tool took 4 times as long)."""
    negated = [-score for score in scores]
    by_score = sorted(range(len(names)), key=negated.__getitem__)
    if not pinned:
        return by_score
    return [i for i in by_score if names[i] in pinned] + [i for i in by_score if names[i] not in pinned]


def _fill(facts: Sequence[ToolFacts], order: Sequence[int], scores: Sequence[float] | None, always: set[str],
          slots: int, room: int) -> tuple[set[str], set[str]]:
    """The tools kept, best first while the count and the room last (and those kept always), and why others were
    not. A tool that matches none of the user's words is not offered past the floor when others match: kept only
    for its place in the configuration, it was noise a small model picked (the memory server's tools, listed
    first, for the time). When nothing matches, the configured order it is; with no `scores` (everything fits: a
    request is sent them all), nothing is left out for matching nothing."""
    kept: set[str] = set()
    reasons: set[str] = set()
    unmatched = set() if scores is None or not any(score > 0 for score in scores) else {  # none: another language
        index for index, score in enumerate(scores) if score <= 0}
    for index in order:
        name, size = facts[index].name, list_chars([facts[index]])
        if name in always or (slots > 0 and size <= room and index not in unmatched):
            kept.add(name)
            slots -= 1
            room -= size
        else:
            reasons.add("tool_budget" if slots <= 0 else "context" if size > room else "unmatched")
    return kept, reasons


def _most_relevant_first(names: Sequence[str], scores: Sequence[float], named: set[str], kept: set[str],
                         ) -> tuple[str, ...]:
    """The kept tools in the order offered: a tool the user named, then the most relevant first (small models
    favour what comes first), ties in the configured order."""
    order = sorted((i for i in range(len(names)) if names[i] in kept),
                   key=lambda i: (names[i] not in named, -scores[i], i))
    return tuple(names[i] for i in order)


def _words(text: str) -> list[str]:
    return list(words_of(text))


def _query(messages: Sequence[Message]) -> str:
    """The recent user turns, the last one twice: what the user asks now weighs more than before."""
    users = _user_texts(messages)[:RECENT_USER_TURNS][::-1]
    return "\n".join([*users, users[-1]]) if users else ""


def _user_texts(messages: Sequence[Message]) -> list[str]:
    """The user messages' words that are read, newest first: each cut to RANKED_CHARS, NAMED_CHARS in all."""
    texts: list[str] = []
    left = NAMED_CHARS
    for message in reversed(messages):
        if left <= 0:
            break
        if message.get("role") == "user":
            texts.append(_ends(content_text(message.get("content"))))
            left -= len(texts[-1])
    return texts


def _ends(text: str) -> str:
    """A long text's start and end: where its writer says what they want of what they pasted between."""
    if len(text) <= RANKED_CHARS:
        return text
    half = RANKED_CHARS // 2
    return f"{text[:half]}\n{text[-half:]}"  # the line break keeps the two halves' cut words apart


def _called(messages: Sequence[Message]) -> set[str]:
    """Tools the conversation has called already (the client's history, with earlier turns restored)."""
    return {str(call["function"].get("name")) for m in messages if m.get("role") == "assistant"
            for call in m.get("tool_calls") or [] if isinstance(call, dict) and isinstance(call.get("function"), dict)}


def _named(facts: Sequence[ToolFacts], texts: Sequence[str]) -> set[str]:
    """Tools the user names: the name as offered, or its part after a server prefix, as a word. One pass
    over the text (a regular expression per tool took 78 % of ranking a 10 MB message)."""
    lowered = "\n".join(texts).lower()
    words = set(NAME_WORD.findall(lowered))
    return {fact.name for fact in facts if (fact.part in words if fact.one_word else _named_oddly(fact.part, lowered))}


def _named_oddly(part: str, lowered: str) -> bool:
    """A name that is not one word (a client's tool may be called anything), searched as the rest once were."""
    return re.search(rf"(?<![\w-]){re.escape(part)}(?![\w-])", lowered) is not None


def _fits(tools: Sequence[Tool], max_chars: int) -> bool:
    # Serialising every definition costs a request time; with no context known there is nothing to weigh.
    return max_chars >= UNLIMITED_CHARS or (wire_chars(list(tools)) if tools else 0) <= max_chars


# A client's own tools made smaller, for a context they would otherwise crowd.
DESCRIPTION_CHARS = 200  # of a tool's description, at most: its first sentence, cut if longer
_FIRST_SENTENCE = re.compile(r"(.+?[.!?])(?=\s|$)", re.DOTALL)
_ANNOTATIONS = frozenset({"description", "title", "examples", "$comment"})
# Where a JSON Schema holds further schemas: one, a list of them, or a map of names to them.
_ONE = frozenset({"items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames"})
_LIST = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_MAP = frozenset({"properties", "$defs", "definitions", "patternProperties", "dependentSchemas"})


def compact_tool(tool: Tool) -> Tool:
    """The tool with its description cut to its first sentence and its schema's annotations left out."""
    function = tool.get("function")
    if not isinstance(function, dict):
        return tool
    compact = function.copy()
    if isinstance(description := function.get("description"), str):
        compact["description"] = first_sentence(description)
    if isinstance(parameters := function.get("parameters"), dict):
        compact["parameters"] = without_annotations(parameters)
    return {**tool, "function": compact}


def first_sentence(text: str, limit: int = DESCRIPTION_CHARS) -> str:
    stripped = text.strip()
    match = _FIRST_SENTENCE.match(stripped)
    sentence = match.group(1) if match else stripped
    return sentence if len(sentence) <= limit else sentence[: limit - 3].rstrip() + "..."


def without_annotations(schema: JSONObject) -> JSONObject:
    """The schema without the words written for people (descriptions, titles, examples). Only schema
    keywords are touched: a property that is itself named `description` keeps its place."""
    kept: JSONObject = {}
    for key, value in schema.items():
        if key in _ANNOTATIONS:
            continue
        if key in _ONE:
            kept[key] = _without_annotations(value)
        elif key in _LIST and isinstance(value, list):
            kept[key] = [_without_annotations(item) for item in value]
        elif key in _MAP and isinstance(value, dict):
            kept[key] = {name: _without_annotations(item) for name, item in value.items()}
        else:  # enum, const, default, required, type...: data the call depends on, kept as they are
            kept[key] = value
    return kept


def _without_annotations(schema: JSONValue) -> JSONValue:
    return without_annotations(schema) if isinstance(schema, dict) else schema
