"""Pure conversions from MCP tools to the OpenAI tools the model is given, and back to MCP by name.

This is the one module that knows both tool shapes. It does no I/O; every rule has a table of tests.
Names are `{server}__{tool}` (or the bare tool name where no two servers share it, with
TOOL_PREFIX=on-conflict), made to match OpenAI's `^[a-zA-Z0-9_-]{1,64}$`; a name that had to be cut
or that collides after sanitising gets a stable hash suffix. Schemas go through the profile in
`schema.py`; the original is kept, compiled, to check arguments.
"""

import difflib
import hashlib
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from jsonschema.protocols import Validator
from mcp.types import Tool

from app.chat.ports import DescribedTool
from app.mcp.approval import ServerConfirm, asks_first
from app.mcp.arguments import compile_validator
from app.mcp.resources import READ_RESOURCE
from app.mcp.schema import to_profile
from app.mcp.skills import LOAD_SKILL
from app.mcp.tasks import may_run_as_task, must_run_as_task
from app.openai.wire import FunctionDefinition, tool_name
from app.openai.wire import Tool as OpenAITool
from app.settings.vocabularies import ConfirmPolicy, PrefixMode, Profile, ProfileSetting

MAX_NAME_LENGTH = 64  # OpenAI: ^[a-zA-Z0-9_-]{1,64}$
_HASH_LENGTH = 8
_UNSAFE_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_-]")
MAX_DESCRIPTION_CHARS = 1000
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n\s*\n")


@dataclass(frozen=True)
class ConversionOptions:
    profile: Profile = "lmstudio"
    prefix: PrefixMode = "always"
    confirm: ConfirmPolicy = "destructive"  # TOOLBRIDGE_CONFIRM: which calls wait for a yes (approval.py)


@dataclass(frozen=True)
class ToolRoute:
    """Where an exposed tool name leads, and how to check arguments for it."""

    server: str
    tool: str
    validator: Validator | None = field(default=None, compare=False, repr=False)
    read_only: bool = False
    idempotent: bool = False
    description: str = field(default="", compare=False, repr=False)  # the server's, before any shortening
    reads_resources: bool = False  # the gateway's own tool for the server's resources (resources.py)
    loads_skills: bool = False  # the gateway's own tool for the server's skills (skills.py)
    runs_as_task: bool = False  # its server runs it as an MCP task, which may outlive the request (tasks.py)
    asks_first: bool = False  # a call waits for the person's yes (TOOLBRIDGE_CONFIRM, mcp.json's `confirm`)
    # How its definition differs from the one pinned (trusted.py): it asks before every call, whatever the grants.
    changed: str | None = field(default=None, compare=False, repr=False)

    @property
    def safe_to_retry(self) -> bool:
        """Whether calling the tool twice does no harm (its server says it only reads, or is idempotent)."""
        return self.read_only or self.idempotent


@dataclass(frozen=True)
class Catalogue:
    """The MCP tools as the model sees them, converted once whenever a tool list changes."""

    openai_tools: tuple[OpenAITool, ...] = ()
    routes: Mapping[str, ToolRoute] = field(default_factory=dict)
    # What the chat wing works out from these tools once (the tool budget's ranking data), kept for as long as they
    # are offered: one for a built catalogue and every part of it (`select`, `ordered`, `clear_of`), so that a
    # toolset reuses what the whole catalogue worked out, and it goes with them when a new catalogue is built.
    memo: dict[str, object] = field(default_factory=dict, compare=False, repr=False)

    def owns(self, name: str) -> bool:
        return name in self.routes

    def route(self, name: str) -> ToolRoute | None:
        return self.routes.get(name)

    def servers(self) -> dict[str, str]:
        """Each tool's server, by the tool's name, in the order offered."""
        return {name: self.routes[name].server for tool in self.openai_tools
                if (name := tool["function"]["name"]) in self.routes}

    def routed(self, name: str) -> tuple[ToolRoute, str | None] | None:
        """A call's route and the reader of its server's resources (`route`, `reader_of`) at once; None for a name
        the catalogue does not offer."""
        route = self.routes.get(name)
        return None if route is None else (route, self.reader_of(route.server))

    def reader_of(self, server: str) -> str | None:
        """The name of the tool that reads the server's resources, if it is offered."""
        return next((name for name, route in self.routes.items() if route.reads_resources and route.server == server),
                    None)

    def similar(self, name: str, limit: int = 3) -> list[str]:
        """Exposed names close to one the model got wrong."""
        return difflib.get_close_matches(name, list(self.routes), n=limit, cutoff=0.5)

    def clear_of(self, taken: AbstractSet[str]) -> "Catalogue":
        """The catalogue with each tool whose name is in `taken` (a client's own tools) renamed to its
        server-prefixed form, so that with bare names a clash costs neither side its tool."""
        clashing = sorted(name for name in taken if name in self.routes)
        if not clashing:
            return self
        renamed: dict[str, str] = {}
        used = set(self.routes) | taken
        for name in clashing:
            route = self.routes[name]
            new = exposed_name(route.server, route.tool)
            if new in used:
                new = hashed_name(new, route.server, route.tool)
            renamed[name] = new
            used.add(new)
        tools = tuple(_renamed(tool, renamed[name]) if (name := tool_name(tool)) in renamed else tool
                      for tool in self.openai_tools)
        return Catalogue(tools, {renamed.get(name, name): route for name, route in self.routes.items()}, self.memo)

    def select(self, keep: Callable[[str, ToolRoute], bool]) -> "Catalogue":
        """The catalogue with only the tools `keep(name, route)` admits, in the same order."""
        routes = {name: route for name, route in self.routes.items() if keep(name, route)}
        if len(routes) == len(self.routes):
            return self
        return Catalogue(tuple(t for t in self.openai_tools if t["function"]["name"] in routes), routes, self.memo)

    def ordered(self, names: Sequence[str]) -> "Catalogue":
        """The same tools offered in the order of `names` (those it leaves out after them, as they were)."""
        if not names:
            return self
        place = {name: index for index, name in enumerate(names)}
        tools = sorted(self.openai_tools, key=lambda tool: place.get(tool["function"]["name"], len(place)))
        return Catalogue(tuple(tools), self.routes, self.memo)

    def describe(self) -> list[DescribedTool]:
        """The injected tools with the server and tool each one maps back to."""
        described = []
        for tool in self.openai_tools:
            route = self.routes[tool["function"]["name"]]
            entry: DescribedTool = {"server": route.server, "tool": route.tool, "asks_first": route.asks_first,
                                    "type": tool["type"], "function": tool["function"]}
            if route.description and not tool["function"].get("description", "").startswith(route.description):
                entry["original_description"] = route.description  # shortened for the model
            if route.validator is not None:  # the server's schema, before the profile's rewrite
                entry["original_parameters"] = route.validator.schema
            described.append(entry)
        return described


def resolve_profile(setting: ProfileSetting, upstream_url: str = "") -> Profile:
    """The profile `auto` means for this upstream. OpenAI's own API (and Azure's) enforces schemas itself and
    takes `strict`: `openai`. Every other server, LM Studio, llama.cpp, Ollama, vLLM or unknown, gets the
    grammar-safe rewrite: those that build grammars need it, and it costs the others nothing. (`llamacpp`
    and `lmstudio` name the same rewrite.)"""
    if setting != "auto":
        return setting
    host = (urlsplit(upstream_url).hostname or "").lower()
    return "openai" if host == "api.openai.com" or host.endswith(".openai.azure.com") else "lmstudio"


def sanitize(name: str) -> str:
    return _UNSAFE_NAME_CHARS.sub("_", name)


def exposed_name(server: str, tool: str) -> str:
    """`{server}__{tool}`, made safe for OpenAI, cut with a stable hash suffix when too long."""
    return _fit(f"{sanitize(server)}__{_tool_part(server, tool)}", server, tool)


def _tool_part(server: str, tool: str) -> str:
    # A name in another script sanitises to underscores only; a hash keeps it distinct and readable.
    safe = sanitize(tool)
    if re.search(r"[a-zA-Z0-9]", safe):
        return safe
    return "tool_" + hashlib.sha256(f"{server}\x00{tool}".encode()).hexdigest()[:_HASH_LENGTH]


def hashed_name(name: str, server: str, tool: str) -> str:
    """A name that stays distinct for distinct (server, tool) pairs even after cutting or sanitising."""
    digest = hashlib.sha256(f"{server}\x00{tool}".encode()).hexdigest()[:_HASH_LENGTH]
    return f"{name[: MAX_NAME_LENGTH - _HASH_LENGTH - 1]}_{digest}"


def build_catalogue(
    tools_by_server: Mapping[str, Sequence[Tool]], options: ConversionOptions | None = None,
    readers: AbstractSet[str] = frozenset(), confirms: Mapping[str, ServerConfirm] | None = None,
    changed: Mapping[tuple[str, str], str] | None = None, skillful: AbstractSet[str] = frozenset(),
    tasking: AbstractSet[str] = frozenset(),
) -> Catalogue:
    """Converts every server's tools, in config order, into one catalogue with unique names. The servers in
    `readers` have the gateway's resource reader among their tools (resources.READ_RESOURCE), those in `skillful` its
    skill loader (skills.LOAD_SKILL); `confirms` holds each server's `confirm` from mcp.json, which with
    `options.confirm` says which calls wait for a yes; `changed`, the diff of each (server, tool) whose definition
    differs from its pin (those ask first too). A tool that only runs as an MCP task is offered when its server is
    in `tasking` (it runs tasks on a wire the gateway speaks them on: tasks.py), and left out otherwise."""
    options = options or ConversionOptions()
    usable = [(server, tool) for server, tools in tools_by_server.items() for tool in tools
              if server in tasking or not must_run_as_task(tool)]
    names = _names(usable, options.prefix)
    taken, openai_tools, routes = Counter(names), list[OpenAITool](), dict[str, ToolRoute]()
    for (server, tool), name in zip(usable, names, strict=True):
        if taken[name] > 1:  # e.g. "a.b" and "a_b" sanitise alike: both get a hash
            name = hashed_name(name, server, tool.name)
        if name in routes:  # a server listing one tool twice: keep the first
            continue
        annotations, diff = tool.annotations, (changed or {}).get((server, tool.name))
        routes[name] = ToolRoute(
            server=server,
            tool=tool.name,
            validator=compile_validator(tool.input_schema),
            read_only=bool(annotations and annotations.read_only_hint),
            idempotent=bool(annotations and annotations.idempotent_hint),
            description=tool.description or "",
            reads_resources=(reads := server in readers and tool.name == READ_RESOURCE),
            loads_skills=(loads := server in skillful and tool.name == LOAD_SKILL),
            runs_as_task=server in tasking and may_run_as_task(tool),
            # The gateway's own reader and loader only read, whatever the server's tools do.
            asks_first=diff is not None or (not (reads or loads) and asks_first(
                tool.name, annotations, (confirms or {}).get(server), options.confirm)),
            changed=diff,
        )
        openai_tools.append(to_openai_tool(name, tool, options.profile))
    return Catalogue(openai_tools=tuple(openai_tools), routes=routes)


def _renamed(tool: OpenAITool, name: str) -> OpenAITool:
    return {**tool, "function": {**tool["function"], "name": name}}


def to_openai_tool(name: str, tool: Tool, profile: Profile = "lmstudio") -> OpenAITool:
    """An OpenAI function tool. `parameters` is always an object schema with `properties`."""
    parameters, strict = to_profile(tool.input_schema, profile)
    function: FunctionDefinition = {
        "name": name,
        "description": _description(tool),
        "parameters": parameters,
    }
    if strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def _names(usable: list[tuple[str, Tool]], prefix: PrefixMode) -> list[str]:
    if prefix == "always":
        return [exposed_name(server, tool.name) for server, tool in usable]
    bare = [_tool_part(server, tool.name) for server, tool in usable]
    owners: dict[str, set[str]] = {}
    for (server, _), name in zip(usable, bare, strict=True):
        owners.setdefault(name, set()).add(server)
    return [
        _fit(name, server, tool.name) if len(owners[name]) == 1 else exposed_name(server, tool.name)
        for (server, tool), name in zip(usable, bare, strict=True)
    ]


def _fit(name: str, server: str, tool: str) -> str:
    return name if len(name) <= MAX_NAME_LENGTH else hashed_name(name, server, tool)


def _description(tool: Tool) -> str:
    text = shortened_description(tool.description or tool.title or "")
    annotations = tool.annotations
    if annotations is None:
        return text
    if annotations.read_only_hint:
        return f"{text} (Read-only.)".strip()
    if annotations.destructive_hint:
        return f"{text} (Changes or deletes data.)".strip()
    return text


def shortened_description(text: str, limit: int = MAX_DESCRIPTION_CHARS) -> str:
    """A description within `limit` characters: its first sentences, or its first words and "…" when the
    first sentence alone is longer. Some servers write pages of usage notes, which cost a small model its
    context and its attention; `/tools` keeps the original."""
    if len(text) <= limit:
        return text
    kept = ""
    for sentence in _SENTENCE_END.split(text.strip()):
        candidate = f"{kept} {sentence}".strip() if kept else sentence
        if len(candidate) > limit:
            break
        kept = candidate
    if kept:
        return kept
    return text[: limit - 1].rsplit(" ", 1)[0].rstrip() + "…"

