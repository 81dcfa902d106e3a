"""A server each key signs in to as itself (mcp.json `"oauth": {"per_key": true}`): each person behind a shared
gateway acts on GitHub as themselves, not as whoever signed the gateway in.

The server's supervisor here never connects. Each key that signed in gets a connection of its own: an ordinary
`ServerSupervisor` with that key's `ServerAuth` (tokens under `oauth/{server}/{key digest}` in the vault), started
when its sign-in finishes, or at start and every SIGN_IN_LOOK seconds for the sign-ins the vault holds (before a
restart, or on another replica). Whatever reads this supervisor in a request (its `live` connection for a call or
a prompt, its `status` for /health and the status page, a restart) reads the caller's key's connection
(`current_identity`); a key with none sees the server waiting for its sign-in. The tools offered are the first
signed-in connection's; a key whose own connection is not ready is not offered them (pool.py)."""

from collections.abc import Callable, Mapping
from typing import Any

import anyio
import structlog

from app.mcp.config import ServerConfig
from app.mcp.connect import ConnectionOpener
from app.mcp.convert import Catalogue
from app.mcp.live import LiveConnection
from app.mcp.oauth_storage import GATEWAY_IDENTITY
from app.mcp.offer import ServerOffer
from app.mcp.options import PoolOptions
from app.mcp.pauses import SIGN_IN_LOOK
from app.mcp.server_auth import ServerAuth, current_identity
from app.mcp.status import ServerState, ServerStatus
from app.mcp.supervisor import ServerSupervisor
from app.mcp.waits import first_of
from app.state import StateStoreError

log = structlog.get_logger("toolbridge.mcp")


class PerKeySupervisor(ServerSupervisor):
    """One server of mcp.json whose every key has its own identity and connection."""

    def __init__(self, *args: Any, start: Callable[[ServerSupervisor], None], **options: Any) -> None:
        """As a ServerSupervisor; `start` runs a key's new supervisor in the pool (pool.py `_start`)."""
        self._children: dict[str, ServerSupervisor] = {}
        super().__init__(*args, **options)
        self._start_child, self._child_options = start, options
        assert self.auth is not None and self.auth.per_key
        self.auth.on_signed_in = self.signed_in_as
        self._own_status.state = ServerState.NEEDS_SIGN_IN

    # What a request reads: its key's connection (set: this supervisor's own, which never connects).

    @property
    def status(self) -> ServerStatus:
        child = self._children.get(current_identity())
        return self._own_status if child is None else child.status

    @status.setter
    def status(self, value: ServerStatus) -> None:
        self._own_status = value

    @property
    def live(self) -> LiveConnection:
        child = self._children.get(current_identity())
        return self._own_live if child is None else child.live

    @live.setter
    def live(self, value: LiveConnection) -> None:
        self._own_live = value

    @property
    def offer(self) -> ServerOffer:
        """The first signed-in connection's: the tools are the server's, whoever listed them."""
        return next((c.offer for c in self._children.values() if c.offer.tools is not None), self._own_offer)

    @offer.setter
    def offer(self, value: ServerOffer) -> None:
        self._own_offer = value

    def ready_for_caller(self) -> bool:
        child = self._children.get(current_identity())
        return child is not None and child.status.state is ServerState.READY

    def count_tools(self, count: int) -> None:
        for status in (self._own_status, *(child.status for child in self._children.values())):
            status.tools = count if status.state is ServerState.READY else 0

    def restart(self) -> None:
        """The caller's key's connection; without one, a look in the vault for its sign-in (another replica's)."""
        child = self._children.get(current_identity())
        if child is not None:
            child.restart()
        elif self._own_live.needed is not None:
            self._own_live.needed.set()

    def retire(self) -> None:
        for child in self._children.values():
            child.retire()
        super().retire()

    def cancel_start(self) -> None:
        for child in self._children.values():
            child.cancel_start()

    def signed_in_as(self, auth: ServerAuth) -> None:
        """A key's sign-in stored tokens: its connection starts (one that waits for it connects by itself)."""
        if auth.identity in self._children or self._stopping.is_set() or self.stop.is_set():
            return
        child = self._children[auth.identity] = ServerSupervisor(self.name, self.config, self._options,
                                                                 self._opener, **(self._child_options | {"auth": auth}))
        self._start_child(child)

    async def run(self) -> None:
        """Starts the connections of the keys the vault holds sign-ins for, and looks again every
        SIGN_IN_LOOK seconds (another replica's sign-ins), until shutdown or a stop."""
        assert self.auth is not None
        try:
            while not (self._stopping.is_set() or self.stop.is_set()):
                for auth in await identities_signed_in(self.auth):
                    self.signed_in_as(auth)
                needed = self._own_live.needed = anyio.Event()
                with anyio.move_on_after(SIGN_IN_LOOK):
                    await first_of(self._stopping.wait, self.stop.wait, needed.wait)
        finally:
            self.done.set()
            self._own_status.state = ServerState.STOPPED if self._stopping.is_set() else self._own_status.state
            self._state_changed()


async def identities_signed_in(server: ServerAuth) -> list[ServerAuth]:
    """A `per_key` server's identities with tokens in the vault (signed in here, before a restart, or on another
    replica); none while the store cannot answer (looked at again later)."""
    if server.vault is None:
        return []
    prefix = f"oauth/{server.name}/"
    try:
        found = [server.for_identity(name.removeprefix(prefix)) for name in await server.vault.names(prefix)]
        return [auth for auth in found if auth.identity != GATEWAY_IDENTITY and await auth.check()]
    except StateStoreError as exc:
        log.warning("mcp_sign_in_unreadable", server=server.name, error=str(exc))
        return []


def supervisor_for(name: str, server: ServerConfig, options: PoolOptions, opener: ConnectionOpener,
                   auth: ServerAuth | None, start: Callable[[ServerSupervisor], None],
                   **common: Any) -> ServerSupervisor:
    """The supervisor of one server of mcp.json: a `PerKeySupervisor` for a `per_key` one."""
    if auth is not None and auth.per_key:
        return PerKeySupervisor(name, server, options, opener, auth=auth, start=start, **common)
    return ServerSupervisor(name, server, options, opener, auth=auth, **common)


def callers_catalogue(catalogue: Catalogue, supervisors: Mapping[str, ServerSupervisor]) -> Catalogue:
    """`catalogue` without the tools of the `per_key` servers the caller's key has not signed in to."""
    waiting = {name for name, s in supervisors.items() if isinstance(s, PerKeySupervisor) and not s.ready_for_caller()}
    return catalogue.select(lambda _, route: route.server not in waiting) if waiting else catalogue
