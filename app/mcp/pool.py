"""The MCP servers of mcp.json, connected for the gateway's lifetime, and their tools routed to.

One `ServerSupervisor` per server keeps it connected (supervisor.py); the pool holds them by name, builds
the catalogue from their tools (in a worker thread, rebuilds.py), answers for their health, routes each call to
its server, and applies reloads of the config. Servers start in parallel and the pool's `__aenter__` returns at
once, so HTTP serves while slow servers are still starting.
"""

from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

import anyio
import structlog
from mcp import MCPError
from mcp.types import REQUEST_TIMEOUT, GetPromptResult

from app.chat.ports import ALL_TOOLS, ProgressReport, ToolAnswers, ToolSelection
from app.mcp.calling import McpCall, call_record, unknown_tool
from app.mcp.config import McpConfig, ServerConfig, log_config
from app.mcp.connect import ConnectionOpener, StartGate
from app.mcp.convert import Catalogue, build_catalogue
from app.mcp.live import NOTE_SECONDS, LiveConnection
from app.mcp.per_key import callers_catalogue, supervisor_for
from app.mcp.pinned import PinnedTools
from app.mcp.processes import end_process_groups
from app.mcp.prompts import PromptBook, PromptEntry, PromptFailed, build_prompt_book
from app.mcp.rebuilds import Rebuilds
from app.mcp.reload import ConfigReloads, diff_configs, request_on_change
from app.mcp.resources import ServerResources
from app.mcp.results import FailureKind, ToolOutcome
from app.mcp.sampling import Complete
from app.mcp.server_auth import SignIns
from app.mcp.skills import Skill
from app.mcp.status import ServerState, ServerStatus, unrun_statuses
from app.mcp.supervisor import PoolOptions, ServerSupervisor
from app.mcp.task_book import TaskBook, TaskEntry
from app.mcp.tasks import TaskNews
from app.mcp.trusted import Change
from app.mcp.watching import connection_gone
from app.ops.call_record import ToolCallObserver
from app.ops.server_health import ServerHealth
from app.state import Vault

log = structlog.get_logger("toolbridge.mcp")
ASK_TASK_SECONDS = 2.0  # a running task's status asked for the status page
TASK_UNKNOWN = "The server no longer knows this task: it restarted, or the task's time to live passed."

# What a rebuild makes: the catalogue, the prompts, and how many tools each server that had a list is offered.
Built = tuple[Catalogue, PromptBook, dict[str, int]]

# The SDK bounds each stdio shutdown (close stdin, 2 s, SIGTERM, 2 s, SIGKILL); this bounds them all.
SHUTDOWN_TIMEOUT = 10.0


class McpPool:
    """Connects every configured server in the background and routes tool calls to them."""

    def __init__(
        self,
        config: McpConfig,
        options: PoolOptions,
        *,
        load_config: Callable[[], McpConfig] | None = None,
        watch: Sequence[Path] = (),
        complete: Complete | None = None,
        on_tool_call: ToolCallObserver | None = None,
        vault: Vault | None = None,
        prepare: Callable[[Catalogue], None] | None = None,
    ) -> None:
        """`load_config` re-reads the config on `request_reload` (with `watch`, when those files change); `complete`
        answers sampling requests; `on_tool_call` learns of every call, to an unknown tool too (server None);
        `prepare` works out what requests will need of each new catalogue (the tool budget's ranking data) in the
        worker thread that built it, before it is in force."""
        self.config, self._options = config, options
        self._reloads = ConfigReloads(load_config) if load_config is not None else None
        self._on_tool_call = on_tool_call
        self.sign_ins = SignIns(vault)  # the HTTP servers' OAuth (server_auth.py)
        self._watch = [path.resolve() for path in watch]
        self._opener = ConnectionOpener(complete=complete, sampling_model=options.sampling_model,
                                        start_gate=StartGate(options.start_slots, options.start_turn),
                                        max_message_bytes=options.max_message_bytes)
        self._stopping = anyio.Event()
        self._prepare = prepare
        self._rebuilds = Rebuilds(self._take_offers, self._install)
        self._counts: dict[str, int] = {}  # the tools the catalogue in force offers of each server that had a list
        self._supervisors = {name: self._supervisor(name, server) for name, server in config.servers.items()}
        self._unrun = unrun_statuses(config)  # entries that never run: broken or disabled ones
        self._catalogue = Catalogue()
        self._prompt_book = PromptBook()
        self._settled = anyio.Event()
        self._change = anyio.Event()  # set and replaced at each change of a status or the catalogue
        self._all_stopped = anyio.Event()
        self._running = 0
        self._task_group: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> Self:
        log_config(self.config)
        self._task_group = self._opener.task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._task_group.start_soon(self._rebuilds.run, name="mcp:catalogue")
        for supervisor in self._supervisors.values():
            self._start(supervisor)
        self._status_changed()
        if not self._running:
            self._all_stopped.set()
        if self._reloads is not None:
            self._task_group.start_soon(self._reloads.run, self._apply, name="mcp:reload")
            if self._watch:
                self._task_group.start_soon(request_on_change, self._watch, self.request_reload, name="mcp:watch")
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stopping.set()
        for supervisor in self._supervisors.values():
            supervisor.cancel_start()
        assert self._task_group is not None
        with anyio.move_on_after(SHUTDOWN_TIMEOUT):
            await self._all_stopped.wait()
        # What is left are stderr readers of pipes a stray grandchild may hold open.
        self._task_group.cancel_scope.cancel()
        await self._task_group.__aexit__(exc_type, exc, tb)
        await end_process_groups(self._opener.process_groups)

    def _supervisor(self, name: str, server: ServerConfig) -> ServerSupervisor:
        return supervisor_for(name, server, self._options, self._opener, self.sign_ins.of(name, server), self._start,
                              stopping=self._stopping, offer_changed=self._offer_changed,
                              offered=self._rebuilds.caught_up, state_changed=self._status_changed)

    def _start(self, supervisor: ServerSupervisor) -> None:
        assert self._task_group is not None
        if not self._running and self._all_stopped.is_set():
            self._all_stopped = anyio.Event()
        self._running += 1
        supervisor.live.holder.task_group = self._task_group  # its calls run here, to outlive a request
        self._task_group.start_soon(self._supervise, supervisor, name=f"mcp:{supervisor.name}")

    async def _supervise(self, supervisor: ServerSupervisor) -> None:
        try:
            await supervisor.run()
        finally:
            self._running -= 1
            if not self._running:
                self._all_stopped.set()

    # -- reloads ------------------------------------------------------------------------------------

    def request_reload(self) -> None:
        """Re-reads the config soon: new servers start, removed ones stop, changed ones restart."""
        if self._reloads is not None:
            self._reloads.request()

    @property
    def config_problem(self) -> str | None:
        """Why the last reload of the config failed (the last good one is in force); None once one succeeds."""
        return self._reloads.problem if self._reloads is not None else None

    async def _apply(self, new: McpConfig) -> None:
        diff = diff_configs({name: s.config for name, s in self._supervisors.items()}, new.servers)
        log.info("mcp_config_reloaded", stopping=diff.stopping, starting=diff.starting, unchanged=diff.unchanged)
        log_config(new)
        going = [self._supervisors[name] for name in diff.stopping]
        for supervisor in going:
            supervisor.retire()
        await self._rebuild_catalogue()
        for supervisor in going:
            with anyio.move_on_after(supervisor.longest_call + SHUTDOWN_TIMEOUT):
                await supervisor.done.wait()
            del self._supervisors[supervisor.name]
            self.sign_ins.drop(supervisor.name)
        self.config = new
        self._unrun = unrun_statuses(new)
        for name in diff.starting:
            self._supervisors[name] = self._supervisor(name, new.servers[name])
            self._start(self._supervisors[name])
        await self._rebuild_catalogue()

    # -- what requests see --------------------------------------------------------------------------

    @property
    def catalogue(self) -> Catalogue:
        """The current tools as the caller may have them; replaced as a whole when a list changes."""
        return callers_catalogue(self._catalogue, self._supervisors)

    def _statuses(self) -> dict[str, ServerStatus]:
        return {**{name: s.status for name, s in self._supervisors.items()}, **self._unrun}

    def health(self) -> dict[str, ServerHealth]:
        return self.sign_ins.shown({name: status.as_dict() for name, status in self._statuses().items()})

    def server_states(self) -> dict[str, str]:
        """Each running server's state alone, without its error (which may carry its stderr): a chat's to tell."""
        return {name: supervisor.status.state.value for name, supervisor in self._supervisors.items()}

    def starting_for(self) -> dict[str, float]:
        """How long each server still in its first start has been starting, in seconds."""
        return {name: age for name, s in self._supervisors.items() if (age := s.status.starting_for()) is not None}

    @property
    def degraded(self) -> bool:
        unhealthy = (ServerState.FAILED, ServerState.STARTING, ServerState.RESTARTING)
        return any(s.state in unhealthy for s in self._statuses().values())

    async def wait_settled(self) -> None:
        """Returns once no server is still starting."""
        await self._settled.wait()

    def tools_for_request(
        self, offered: bool = True, client_tools: frozenset[str] = frozenset(), selection: ToolSelection = ALL_TOOLS
    ) -> PinnedTools:
        """The catalogue as it is now, kept by one request for its whole life (an empty one if not offered):
        the tools its user selected, with no name that one of the client's own tools has."""
        if not offered:
            return PinnedTools(self, Catalogue())
        catalogue = self._catalogue.clear_of(client_tools)
        if selection != ALL_TOOLS:
            catalogue = catalogue.select(lambda name, route: selection.admits(name, route.server))
        return PinnedTools(self, callers_catalogue(catalogue, self._supervisors))

    def knows(self, name: str) -> bool:
        """Whether a name is one of the configured servers or a tool as offered now."""
        return name in self._supervisors or self._catalogue.owns(name)

    async def call_tool(
        self, name: str, arguments: str, on_progress: ProgressReport | None = None, catalogue: Catalogue | None = None,
        answers: ToolAnswers | None = None,
    ) -> ToolOutcome:
        """Runs one tool call, named as in `catalogue` (default: the current one); with `answers`, the same
        call again with the person's answers to the questions it came back with. Every failure comes back as
        an error outcome for the model, never raised."""
        catalogue = self._catalogue if catalogue is None else catalogue
        routed = catalogue.routed(name)
        if routed is None:
            unknown = unknown_tool(name, catalogue.similar(name), self._options.rendering)
            if self._on_tool_call is not None:  # no server: "my model calls a tool that is not there"
                self._on_tool_call(call_record(None, name, unknown, 0.0, arguments))
            return unknown.outcome
        route, reader = routed
        call = McpCall(route, self._options.rendering, on_progress, reader=reader, answers=answers)
        supervisor = self._supervisors.get(route.server)
        if supervisor is None:  # a request from before a reload that removed the server
            removed = f"MCP server '{route.server}' was removed from the config."
            ended = call.fail(FailureKind.SERVER_UNAVAILABLE, removed)
        else:
            ended = await supervisor.live.call(call, arguments)
        call.record(ended, self._on_tool_call, arguments)
        return ended.outcome

    @property
    def prompt_book(self) -> PromptBook:
        """The servers' prompts by command; replaced as a whole when a list changes."""
        return self._prompt_book

    def resources(self) -> dict[str, ServerResources]:
        """What each server with resources offers, and the tool that reads them (None: not offered)."""
        return {name: {"read_with": self._catalogue.reader_of(name), **s.offer.resources.describe()}
                for name, s in self._supervisors.items() if s.offer.resources}

    def restart(self, name: str) -> bool:
        """Restarts one server now (the status page's button); False if there is no such server running."""
        supervisor = self._supervisors.get(name)
        if supervisor is None:
            return False
        supervisor.restart()
        return True

    async def get_prompt(self, entry: PromptEntry, arguments: dict[str, str]) -> GetPromptResult:
        """The prompt's messages from its server.

        Raises:
            PromptFailed: the server is down, refused, or did not answer in time.
        """
        if entry.skill_uri is not None:
            return await self._prompted(entry).load_skill(entry.skill_uri, arguments.get("request", ""))
        return await self._prompted(entry).get_prompt(entry.prompt.name, arguments)

    async def complete(self, entry: PromptEntry, argument: str, partial: str, context: dict[str, str]) -> list[str]:
        """The server's candidates for a prompt argument's value (none when it offers no completions).

        Raises:
            PromptFailed: as `get_prompt`.
        """
        return await self._prompted(entry).complete(entry.prompt.name, argument, partial, context)

    def _prompted(self, entry: PromptEntry) -> LiveConnection:
        supervisor = self._supervisors.get(entry.server)
        if supervisor is None:
            raise PromptFailed(f"MCP server '{entry.server}' was removed from the config.")
        return supervisor.live

    def skills(self) -> dict[str, tuple[Skill, ...]]:
        """Each server's skills (skills.py), as its resources last listed them; servers without any left out."""
        return {name: skills for name, s in self._supervisors.items() if (skills := s.offer.skills)}

    def definition_changes(self) -> list[Change]:
        """The tools whose definitions differ from those pinned (trusted.py), for the status page and the CLI."""
        return self._options.trusted.changes() if self._options.trusted is not None else []

    async def tasks_now(self, caller: str) -> list[TaskEntry]:
        """The caller's tasks, those still running asked about now, all at once and each bounded (one that cannot
        be asked, or whose server asked to be polled less often, stays as it was last heard of).

        Raises: StateStoreError."""
        book = self._options.task_book
        if book is None:
            return []
        listed = await book.of(caller)  # out of the task group: its errors are raised as themselves
        async with anyio.create_task_group() as asking:
            for entry in listed:
                if not entry.ended and book.due(caller, entry):
                    asking.start_soon(self._ask_task, book, caller, entry)
        return await book.of(caller)

    async def _ask_task(self, book: TaskBook, caller: str, entry: TaskEntry) -> None:
        supervisor = self._supervisors.get(entry.server)
        if supervisor is None:
            return
        news: TaskNews | None = None
        with anyio.move_on_after(ASK_TASK_SECONDS):
            try:
                news = await supervisor.live.task_news(entry.task_id)
            except (PromptFailed, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return  # the server is down: it may still know the task when it is back
            except MCPError as exc:
                if connection_gone(exc) or exc.code == REQUEST_TIMEOUT:
                    return  # as above, or slow: asked again at the next read
                news = TaskNews(entry.task_id, "failed", TASK_UNKNOWN)  # as a chat's next turn takes it: never ends
        if news is None:
            return
        if (news.status, news.message) != (entry.status, entry.message):
            with anyio.CancelScope(shield=True), anyio.move_on_after(NOTE_SECONDS):  # a page that left still keeps it
                await book.note(caller, entry.server, entry.tool, entry.task_id, news.status, news.message)
        book.asked(caller, entry.server, entry.task_id, news.status, news.poll_seconds)  # what it said is written

    async def cancel_task(self, caller: str, server: str, task_id: str) -> TaskEntry | None:
        """Has the server cancel one of `caller`'s listed tasks; the entry as it stands after, or None when the
        caller lists no such task.

        Raises: PromptFailed: the server is down, was removed, or refused (the task had ended)."""
        book = self._options.task_book
        entry = await book.find(caller, server, task_id) if book is not None else None
        if book is None or entry is None:
            return None
        supervisor = self._supervisors.get(server)
        if supervisor is None:
            raise PromptFailed(f"MCP server '{server}' was removed from the config.")
        try:
            status = await supervisor.live.cancel_task(task_id)
        except MCPError as exc:
            raise PromptFailed(f"MCP server '{server}' did not cancel the task: it may have ended.") from exc
        await book.note(caller, server, entry.tool, task_id, status, "cancelled on the status page")
        return await book.find(caller, server, task_id)

    async def accept_definition(self, server: str, tool: str) -> bool:
        """An operator trusts a changed tool's definition as now listed: it asks as before from the next request.
        False when it had not changed."""
        if self._options.trusted is None or not await self._options.trusted.accept(server, tool):
            return False
        await self._rebuild_catalogue()
        return True

    def _offer_changed(self) -> None:
        if not self._stopping.is_set():  # a catalogue built while every server stops would serve no request
            self._rebuilds.ask()

    async def _rebuild_catalogue(self) -> None:
        """Rebuilds the catalogue and returns once the new one is in force."""
        self._rebuilds.ask()
        await self._rebuilds.caught_up()

    def _take_offers(self) -> Callable[[], Built]:
        """What the servers offer now, and the build of the catalogue and prompts from it (run in a worker thread:
        it reads only what is taken here)."""
        ordered = {name: s.offer.offered() for name, s in self._supervisors.items() if s.offer.tools is not None}
        readers = {name for name, s in self._supervisors.items() if s.offer.reads_resources}
        skillful = {name for name, s in self._supervisors.items() if s.offer.loads_skills}
        tasking = {name for name, s in self._supervisors.items() if s.offer.runs_tasks}
        confirms = {name: s.config.confirm for name, s in self._supervisors.items()}  # mcp.json's, per server
        prompts = {name: s.offer.prompts for name, s in self._supervisors.items()}
        skills = {name: s.offer.skills for name, s in self._supervisors.items() if s.offer.tools is not None}
        conversion, prepare = self._options.conversion, self._prepare
        trusted = self._options.trusted
        changed = {(c.server, c.tool): c.diff for c in trusted.changes()} if trusted is not None else {}

        def build() -> Built:
            catalogue = build_catalogue(ordered, conversion, readers, confirms, changed, skillful, tasking)
            if prepare is not None:
                try:
                    prepare(catalogue)
                except Exception:  # boundary: requests work out what it failed to, as they need it
                    log.exception("mcp_catalogue_prepare_failed")
            # What is offered, after every filter (mcp.json, blocked, tools that only run as MCP tasks).
            offered = Counter(route.server for route in catalogue.routes.values())
            return catalogue, build_prompt_book(prompts, skills), {name: offered[name] for name in ordered}

        return build

    def _install(self, built: Built) -> None:
        self._catalogue, self._prompt_book, self._counts = built
        self._status_changed()

    def _status_changed(self) -> None:
        # Counted at each change, not only with each catalogue: a `per_key` server shows its count only to a key
        # whose own connection is ready, which comes after the build that offers its tools.
        for name, count in self._counts.items():
            supervisor = self._supervisors.get(name)
            if supervisor is not None and supervisor.offer.tools is not None:
                supervisor.count_tools(count)
        if not any(s.state is ServerState.STARTING for s in self._statuses().values()):
            self._settled.set()
        self._change.set()
        self._change = anyio.Event()

    async def next_change(self) -> None:
        """Returns at the next change of a server's status or of the catalogue."""
        await self._change.wait()

    async def wait_for(self, name: str, predicate: Callable[[ServerHealth], bool]) -> ServerHealth:
        """Waits until `predicate` holds for the server's /health entry (bound it with a timeout)."""
        while not predicate(status := self.health().get(name, {"state": "unknown"})):
            await self.next_change()
        return status

