"""The tools one request offers and calls, pinned for its whole life: the loop's `RequestTools`
(app/chat/ports.py). A tool list that changes meanwhile reaches the next request; the pool (pool.py)
runs the calls, each named as in this request's catalogue."""

from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from app.chat.ports import ProgressReport, ToolAnswers
from app.mcp.convert import Catalogue
from app.mcp.results import ToolOutcome
from app.openai.wire import Tool as OpenAITool


class ToolRunner(Protocol):
    """What runs a pinned request's calls: the pool."""

    async def call_tool(self, name: str, arguments: str, on_progress: ProgressReport | None = None,
                        catalogue: Catalogue | None = None, answers: ToolAnswers | None = None) -> ToolOutcome: ...


@dataclass(frozen=True)
class PinnedTools:
    """The tools one request offers and calls, pinned for its whole life (the loop's `RequestTools`)."""

    pool: ToolRunner
    catalogue: Catalogue
    # The catalogue's, kept as a field: the loop reads it several times a round, a property call each time.
    openai_tools: Sequence[OpenAITool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "openai_tools", self.catalogue.openai_tools)

    @property
    def memo(self) -> MutableMapping[str, object]:
        return self.catalogue.memo

    async def call_tool(self, name: str, arguments: str, on_progress: ProgressReport | None = None,
                        answers: ToolAnswers | None = None) -> ToolOutcome:
        return await self.pool.call_tool(name, arguments, on_progress, self.catalogue, answers)

    def only(self, names: frozenset[str], order: Sequence[str] = ()) -> "PinnedTools":
        return PinnedTools(self.pool, self.catalogue.select(lambda name, _: name in names).ordered(order))

    def asks_first(self, name: str) -> bool:
        route = self.catalogue.route(name)
        return route is not None and route.asks_first

    def definition_change(self, name: str) -> str | None:
        route = self.catalogue.route(name)
        return None if route is None else route.changed

    def server_of(self, name: str) -> str | None:
        route = self.catalogue.route(name)
        return None if route is None else route.server

    def servers(self) -> dict[str, str]:
        return self.catalogue.servers()
