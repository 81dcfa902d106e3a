"""The words a tool is found by, and the words of a request, for the tool budget's ranking (tool_budget.py).

BM25 over a tool's name and description alone missed needs said in everyday words: with twelve popular servers
mounted, "What do you remember about Alice?" found none of the memory server's tools, and "Open example.com in
the browser" ranked `browser_navigate` ("Navigate to a URL") below tools that merely say "open". So:
- a tool's name is split into words (`browser_navigate`, `kubectl_logs`, `API-post-search`, `getUser`) and counts
  twice, as a title does: it says what the tool does in the fewest words;
- its server's name counts too, with everyday words for what the best-known servers are (SERVER_WORDS: people
  say "the database", not "postgres"; "what do you remember", not "the knowledge graph");
- a request's words gain a few synonyms in tools' own vocabulary (SYNONYMS: "open" a page is to navigate,
  a "photo" is an image), and a web address in it reads as a URL;
- both sides are stemmed (Snowball's English stemmer, PyStemmer), so "pods" finds "pod" and "commits" "commit".
"""

import functools
import re
from collections.abc import Iterable
from typing import Protocol

from app.openai.wire import FunctionDefinition, Tool

_WORD_BOUNDARY = re.compile(r"[_\-./:]+|(?<=[a-z0-9])(?=[A-Z])")
_ADDRESS = re.compile(r"\bhttps?://\S+|\b(?:[a-z0-9-]+\.)+(?:com|org|net|io|dev|ai|app|co|edu|gov|uk|de|fr)\b", re.I)
NAME_WEIGHT = 2  # a tool's name words count as often as this against its description's

# Everyday words for servers people mount most, by a word of the server's name as mcp.json gives it.
SERVER_WORDS = {
    "memory": "memory remember recall knowledge",
    "postgres": "database sql table rows",
    "postgresql": "database sql table rows",
    "mysql": "database sql table rows",
    "sqlite": "database sql table rows",
    "playwright": "browser web page website",
    "puppeteer": "browser web page website",
    "browser": "browser web page website",
    "kubernetes": "kubernetes k8s cluster pod deployment",
    "k8s": "kubernetes k8s cluster pod deployment",
    "github": "github repository repo code",
    "gitlab": "gitlab repository repo code",
    "git": "git repository commit branch",
    "notion": "notion notes workspace page",
    "brave": "web search internet online",
    "tavily": "web search internet online",
    "firecrawl": "web website scrape crawl",
    "fetch": "web page url download",
    "context7": "documentation docs library",
    "time": "time clock timezone date day today now",
    "filesystem": "file folder directory",
    "slack": "slack message channel",
    "sequential": "think reason step",
}

# A request's everyday words, and the words tools use for the same thing (matched by stem: "pictures" too).
SYNONYMS = {
    "open": "navigate", "visit": "navigate", "browse": "navigate",
    "picture": "image", "photo": "image", "pic": "image",
    "remember": "memory", "recall": "memory", "forget": "memory delete", "told": "memory", "mentioned": "memory",
    "online": "web search", "internet": "web search", "google": "web search", "web": "search",
    "restart": "rollout", "redeploy": "rollout", "rollback": "rollout undo", "roll": "rollout",
    "readme": "file contents", "repo": "repository", "pr": "pull request",
    "db": "database", "docs": "documentation", "website": "web page url", "site": "web page url",
    "link": "url", "webpage": "web page url",
    # what people ask of things, in the words of APIs: to see some, to make one
    "which": "list get", "show": "list get", "new": "create", "make": "create", "bug": "issue",
}

def tool_document(tool: Tool, server: str | None) -> str:
    """What a tool is found by: its name's words (twice), its server's, its description and its parameters' names."""
    function: FunctionDefinition = tool.get("function") or {"name": ""}
    name = split_name(str(function.get("name") or ""))
    parameters = (function.get("parameters") or {}).get("properties")
    return " ".join([*[name] * NAME_WEIGHT, server_words(server), str(function.get("description") or ""),
                     *map(str, parameters if isinstance(parameters, dict) else ())])


def request_words(text: str) -> str:
    """A request's words and their synonyms in tools' vocabulary."""
    synonyms = _stemmed_synonyms()
    extra = [synonyms[stem] for stem in stem_all(re.findall(r"[a-z]+", text.lower())) if stem in synonyms]
    if _ADDRESS.search(text):
        extra.append("url web page")
    return " ".join([text, *extra])


@functools.lru_cache(maxsize=1024)
def server_words(server: str | None) -> str:
    """A server's name's words and the everyday words for it: worked out once a server, not once a tool a request."""
    if not server:
        return ""
    words = split_name(server).lower().split()
    return " ".join([*words, *(SERVER_WORDS[word] for word in words if word in SERVER_WORDS)])


def split_name(name: str) -> str:
    return _WORD_BOUNDARY.sub(" ", name)


def stem_all(words: Iterable[str]) -> list[str]:
    return _stemmer().stemWords(list(words))


@functools.cache
def _stemmed_synonyms() -> dict[str, str]:
    return dict(zip(stem_all(SYNONYMS), SYNONYMS.values(), strict=True))


@functools.cache
def _stemmer() -> "_Stemmer":
    import Stemmer

    stemmer: _Stemmer = Stemmer.Stemmer("english")
    return stemmer


class _Stemmer(Protocol):
    """What PyStemmer's Stemmer is to us (it ships no types)."""

    def stemWords(self, words: list[str]) -> list[str]: ...
