"""The tool budget's ranking data (tool_budget.py), worked out once per tool list instead of once per request: what
each tool is found by (its document's words, tool_words.py), its size as JSON, and the BM25 index over the list.

With 1,000 tools mounted, a ranked request spent more than half of its ranking writing every tool's document again
(to find the index cached for them) and serialising every tool to weigh it. Now the data of a catalogue is worked
out when the catalogue is built (`prepare_ranking`, in the pool's worker thread) and kept with it, in the `memo` a
catalogue shares with its parts (a toolset, what a key may use, the tools renamed away from a client's): a request
then only scores its words and picks. A part reuses its tools' facts and gets its own index once, since BM25's
weights depend on the whole list. The client's own tools differ from request to request and are weighed each time
(their words remembered by document). A catalogue's data goes when a new catalogue replaces it.
"""

import functools
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import orjson

from app.chat.offer.context_budget import wire_chars
from app.chat.offer.ranker_import import bm25s_module
from app.chat.offer.tool_words import split_name, stem_all, tool_document
from app.openai.wire import Tool, tool_name

INDEXES_KEPT = 16  # lists whose data a catalogue keeps: itself, toolsets, keys' shares, with a client's tools
CLIENT_WORDS_KEPT = 4096  # client tools' words, by document (Open WebUI sends the same 36 every time)
NAME_WORD = re.compile(r"[\w-]+")
_MEMO_KEY = "tool_ranking"


class Rankable(Protocol):
    """A request's MCP tools as ranking reads them (the pool's pinned tools, a catalogue)."""

    @property
    def openai_tools(self) -> Sequence[Tool]: ...

    @property
    def memo(self) -> MutableMapping[str, object]:
        """Kept with the catalogue the tools come from, and shared with its parts."""
        ...

    def servers(self) -> dict[str, str]: ...


@dataclass(frozen=True, eq=False)
class ToolFacts:
    """What ranking reads of one tool."""

    tool: Tool
    name: str
    server: str | None
    words: tuple[str, ...]  # its document's, tokenised and stemmed as the index takes them
    size: int | None  # characters as JSON; None: only the standard library writes it (integers past 64 bits)
    part: str  # the name after a server prefix, lowered: what a user names the tool by
    one_word: bool  # `part` is one word, looked up among the user's words (else searched for in their text)


def tool_facts(tool: Tool, server: str | None, words: tuple[str, ...] | None = None) -> ToolFacts:
    name = tool_name(tool)
    part = name.split("__")[-1].lower()
    return ToolFacts(tool, name, server, words_of(tool_document(tool, server)) if words is None else words,
                     _json_size(tool), part, NAME_WORD.fullmatch(part) is not None)


def list_chars(facts: Sequence[ToolFacts]) -> int:
    """`wire_chars` of these tools as one list, from their sizes: a list is its items, a comma between two, and
    its brackets."""
    if not facts:
        return 0
    total = 0
    for fact in facts:
        if fact.size is None:
            return wire_chars([fact.tool for fact in facts])
        total += fact.size
    return total + len(facts) + 1


def _json_size(tool: Tool) -> int | None:
    try:
        return len(orjson.dumps(tool).decode())
    except orjson.JSONEncodeError:
        return None


class _Unbuilt:
    pass


_BUILD = _Unbuilt()


class ToolIndex:
    """A list of tools ready to rank: each one's facts, and the BM25 index over their words."""

    def __init__(self, facts: Sequence[ToolFacts], index: "_Index | _Unbuilt | None" = _BUILD) -> None:
        """`index`: the index of these facts' words when known (None: no word to rank by); by default, built now."""
        self.facts = tuple(facts)
        self.tools: Sequence[Tool] = tuple(fact.tool for fact in self.facts)
        self.names = tuple(fact.name for fact in self.facts)
        self.name_set = frozenset(self.names)
        self.index = _build_index(self.facts) if isinstance(index, _Unbuilt) else index
        self._lock = threading.Lock()
        self._joined: OrderedDict[tuple[tuple[str, ...], ...], _Index | None] = OrderedDict()

    @classmethod
    def of(cls, tools: Sequence[Tool], servers: Mapping[str, str]) -> "ToolIndex":
        """A list's data worked out whole, kept by nobody (a list that no catalogue holds)."""
        return cls([tool_facts(tool, servers.get(tool_name(tool))) for tool in tools])

    def scores(self, words: list[str]) -> list[float]:
        if self.index is None or not words:  # bm25s fails on an empty query ("hi" is all stopwords)
            return [0.0] * len(self.facts)
        return [float(score) for score in self.index.get_scores(words)]

    def after(self, first: Sequence[ToolFacts]) -> "ToolIndex":
        """The list with `first` (a client's tools) before its own; their index is kept for the next request whose
        tools have the same words."""
        key = tuple(fact.words for fact in first)
        with self._lock:
            if key in self._joined:
                self._joined.move_to_end(key)
                return ToolIndex([*first, *self.facts], self._joined[key])
        joined = ToolIndex([*first, *self.facts])
        with self._lock:
            self._joined[key] = joined.index
            while len(self._joined) > INDEXES_KEPT:
                self._joined.popitem(last=False)
        return joined

    @functools.cached_property
    def servers(self) -> dict[str, str | None]:
        return {fact.name: fact.server for fact in self.facts}


class _Kept:
    """What a catalogue and its parts keep for ranking: each tool's facts by name (within one catalogue a name is
    one tool; `clear_of` renames a tool the same way every time), and the data of the lists ranked last."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.facts: dict[str, ToolFacts] = {}
        self.lists: OrderedDict[tuple[str, ...], ToolIndex] = OrderedDict()

    def find(self, tools: Sequence[Tool]) -> ToolIndex | None:
        with self.lock:
            for kept in self.lists.values():
                if kept.tools is tools:  # the same tuple as last time: the catalogue's own, or a part held on to
                    return kept
        names = tuple(tool_name(tool) for tool in tools)
        with self.lock:
            found = self.lists.get(names)
            if found is not None:
                self.lists.move_to_end(names)
            return found

    def add(self, tools: Sequence[Tool], servers: Mapping[str, str]) -> ToolIndex:
        with self.lock:
            known = dict(self.facts)
        facts = [known.get(name) or tool_facts(tool, servers.get(name))
                 for tool in tools for name in (tool_name(tool),)]
        made = ToolIndex(facts)
        if isinstance(tools, tuple):
            made.tools = tools  # found by identity next time
        with self.lock:
            self.facts.update((fact.name, fact) for fact in facts)
            self.lists[made.names] = made
            while len(self.lists) > INDEXES_KEPT:
                self.lists.popitem(last=False)
        return made


def _kept(tools: Rankable) -> _Kept:
    kept = tools.memo.get(_MEMO_KEY)
    if not isinstance(kept, _Kept):
        kept = tools.memo.setdefault(_MEMO_KEY, _Kept())  # two threads at once: both use the one that got in
    assert isinstance(kept, _Kept)
    return kept


def kept_ranking(tools: Rankable) -> ToolIndex | None:
    """The list's data if its catalogue keeps it (None: ranking now would have to work it out first)."""
    return _kept(tools).find(tools.openai_tools)


def ranking_of(tools: Rankable) -> ToolIndex:
    """The list's data, worked out now if its catalogue does not keep it yet (the facts that the catalogue or
    another part of it worked out are reused)."""
    kept = _kept(tools)
    return kept.find(tools.openai_tools) or kept.add(tools.openai_tools, tools.servers())


def prepare_ranking(tools: Rankable, budget: int = 0) -> None:
    """A new catalogue's data worked out before a request needs it, when it has more tools than the `budget`'s count
    (a request offered all of them is ranked; 0: any catalogue): the pool calls this with each catalogue it builds,
    in the worker thread that built it. One within the count is ranked only when its tools outgrow a small context
    or join a client's: the first such request works its data out then (loop_options.py, in a worker thread), and a
    gateway whose requests all fit never imports bm25s, 12 MB of its memory (issue 47)."""
    if len(tools.openai_tools) > budget:
        ranking_of(tools)


def client_facts(tools: Sequence[Tool], servers: Mapping[str, str | None]) -> list[ToolFacts]:
    """A client's tools' facts, to be ranked with ours: their words remembered by document, their sizes weighed."""
    return [tool_facts(tool, server, _document_words(tool_document(tool, server)))
            for tool in tools for server in (servers.get(tool_name(tool)),)]


@functools.lru_cache(maxsize=CLIENT_WORDS_KEPT)
def _document_words(document: str) -> tuple[str, ...]:
    return words_of(document)


def _build_index(facts: Sequence[ToolFacts]) -> "_Index | None":
    """The BM25 index of these tools' words; None when none has a word to rank by."""
    corpus = [list(fact.words) for fact in facts]
    if not any(corpus):
        return None
    index: _Index = bm25s_module().BM25()
    index.index(corpus, show_progress=False)
    return index


class _Index(Protocol):
    """What a bm25s.BM25 is to us (bm25s ships no types)."""

    def index(self, corpus: list[list[str]], show_progress: bool) -> object: ...

    def get_scores(self, query: list[str]) -> Iterable[float]: ...


def words_of(text: str) -> tuple[str, ...]:
    [words] = bm25s_module().tokenize([split_name(text)], stopwords="en", stemmer=stem_all, return_ids=False,
                                      show_progress=False)
    return tuple(words)
