"""The MCP pool as one caller's key sees it: only the servers and tools its set holds (app/access/scope.py
decides). Every route and the chat path reach the pool through this when the key is limited or can be taken out:
a server outside the set is not listed, not restarted, its prompts and resources not shown, and its tools neither
offered nor called (a call of one is a call of an unknown tool).

A request's calls ask the keys file again (`now`), each before it runs: a key taken out since the request began
stops it there, with a 401 (the answer's error event once it streams), and a call its narrowed set no longer holds
is a call of an unknown tool."""

from collections.abc import Callable

from mcp.types import GetPromptResult

from app.access import KeyScope
from app.chat.ports import ALL_TOOLS, ProgressReport, ToolAnswers, ToolSelection
from app.mcp.convert import Catalogue
from app.mcp.pinned import PinnedTools
from app.mcp.pool import McpPool
from app.mcp.prompts import PromptBook, PromptEntry, PromptFailed
from app.mcp.resources import ServerResources
from app.mcp.results import ToolOutcome
from app.mcp.status import ServerState
from app.openai.errors import AuthenticationFailed
from app.ops.server_health import ServerHealth

KEY_WITHDRAWN = ("The API key of this request was taken out of the gateway's keys file while it ran; it stopped "
                 "before its next tool call.")


class KeyView:
    def __init__(self, pool: McpPool, scope: KeyScope,
                 now: Callable[[KeyScope], KeyScope | None] | None = None) -> None:
        """`now`: what the key may use now (the key ring's), asked before each call; None: `scope` for good."""
        self.pool, self.scope, self._now = pool, scope, now

    @property
    def catalogue(self) -> Catalogue:
        return _within(self.pool.catalogue, self.scope)

    def tools_for_request(
        self, offered: bool = True, client_tools: frozenset[str] = frozenset(), selection: ToolSelection = ALL_TOOLS
    ) -> PinnedTools:
        pinned = self.pool.tools_for_request(offered, client_tools, selection)
        return PinnedTools(self, _within(pinned.catalogue, self.scope))  # its calls come back here, to be checked

    def knows(self, name: str) -> bool:
        """Whether `name` is a server or a tool as offered that this key may use: another's is no name at all."""
        route = self.pool.catalogue.route(name)
        if route is not None and self.scope.may_call(name, route.server):
            return True
        return self.scope.may_use_server(name) and self.pool.knows(name)

    async def call_tool(self, name: str, arguments: str, on_progress: ProgressReport | None = None,
                        catalogue: Catalogue | None = None, answers: ToolAnswers | None = None) -> ToolOutcome:
        """Raises:
            AuthenticationFailed: the key was taken out of the keys file since the request was admitted."""
        catalogue = catalogue or self.catalogue
        scope = self.scope if self._now is None else self._now(self.scope)
        if scope is None:
            raise AuthenticationFailed(KEY_WITHDRAWN, code="key_withdrawn")
        if scope != self.scope:  # the file changed under the request: what it narrowed applies now
            catalogue = _within(catalogue, scope)
        return await self.pool.call_tool(name, arguments, on_progress, catalogue, answers)

    @property
    def prompt_book(self) -> PromptBook:
        return self.pool.prompt_book.select(self.scope.may_use_server)

    async def get_prompt(self, entry: PromptEntry, arguments: dict[str, str]) -> GetPromptResult:
        self._may_prompt(entry)
        return await self.pool.get_prompt(entry, arguments)

    async def complete(self, entry: PromptEntry, argument: str, partial: str, context: dict[str, str]) -> list[str]:
        self._may_prompt(entry)
        return await self.pool.complete(entry, argument, partial, context)

    def _may_prompt(self, entry: PromptEntry) -> None:
        if not self.scope.may_use_server(entry.server):  # entries come from the book above: never, but cheap
            raise PromptFailed(f"There is no prompt '{entry.command}'.")

    def health(self) -> dict[str, ServerHealth]:
        """The servers this key may use, and beside each it signs in to, whether this key may (`may_sign_in`)."""
        shown = {name: status for name, status in self.pool.health().items() if self.scope.may_use_server(name)}
        for name, status in shown.items():
            if "signed_in" in status:
                status["may_sign_in"] = self.may_sign_in(name)
        return shown

    def server_states(self) -> dict[str, str]:
        """The states of the servers this key may use (app/chat/offer/missing_servers.py)."""
        return {name: state for name, state in self.pool.server_states().items() if self.scope.may_use_server(name)}

    def starting_for(self) -> dict[str, float]:
        """How long each server this key may use has been in its first start (app/chat/offer/missing_servers.py)."""
        return {name: age for name, age in self.pool.starting_for().items() if self.scope.may_use_server(name)}

    def may_sign_in(self, name: str) -> bool:
        """Whether this key may start and end the server's sign-in: its own on a `per_key` server; the one every
        key acts as only if the key may change it (app/access/scope.py)."""
        auth = self.pool.sign_ins.find(name)
        if auth is None or not auth.person_signs_in or not self.scope.may_use_server(name):
            return False
        return auth.per_key or self.scope.may_sign_in(name)

    def servers_needing_sign_in(self) -> list[str]:
        """This key's servers that wait for a person's sign-in before their tools are offered. Each is asked to
        look in the vault now: a sign-in finished on another replica is taken up by the next message, not in
        15 s (a restart of a server that waits is that look)."""
        waiting = [name for name, status in self.health().items() if status["state"] == ServerState.NEEDS_SIGN_IN]
        for name in waiting:
            self.pool.restart(name)
        return waiting

    def resources(self) -> dict[str, ServerResources]:
        return {name: listing for name, listing in self.pool.resources().items() if self.scope.may_use_server(name)}

    def restart(self, name: str) -> bool:
        """Restarts the server if this key may use it; False as for a server that does not exist."""
        return self.scope.may_use_server(name) and self.pool.restart(name)

    async def next_change(self) -> None:
        await self.pool.next_change()


def _within(catalogue: Catalogue, scope: KeyScope) -> Catalogue:
    """The tools of `catalogue` the key may call."""
    return catalogue if scope.everything else catalogue.select(lambda name, route: scope.may_call(name, route.server))
