"""Where the background tasks a key's calls started are listed (issue 49), for the status page: one vault record per
API key (app/state/vault.py: encrypted; SQLite beside memory's file, Redis for replicas), under a name keyed with the
vault's key, changed while held. What the model is told of a task does not come from here: it comes from the task's
server, asked again each turn (tasks.py). So a record lost or damaged hides a task from the page and nothing more.

Each entry is what the server last said of the task (status, message), `updated` when that last changed: a read that
hears nothing new writes nothing. A key keeps MAX_TASKS, the oldest going first. When the page may ask a running task's
server again (its `pollInterval`) is kept in this process only: another replica asks on its own.
"""

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import structlog

from app.chat.ports import TASK_ENDED
from app.openai.wire import JSONObject
from app.state import StateStoreError, Vault

log = structlog.get_logger("toolbridge.tasks")

MAX_TASKS = 50  # per API key
HOLD_SECONDS = 5.0
LONGEST_POLL = 60.0  # seconds: a longer pollInterval would leave the page showing what a task did minutes ago
MAX_POLL_TIMES = 10_000  # running tasks whose next ask is remembered (past it, the oldest are forgotten: asked anew)


@dataclass(frozen=True)
class TaskEntry:
    server: str
    task_id: str
    tool: str  # as the server names it
    status: str  # working, input_required, completed, failed, cancelled
    message: str  # the server's status message, or ""
    started: float  # epoch seconds
    updated: float

    @property
    def ended(self) -> bool:
        return self.status in TASK_ENDED


def _entry(value: object) -> TaskEntry | None:
    if not isinstance(value, dict):
        return None
    try:
        return TaskEntry(str(value["server"]), str(value["task_id"]), str(value["tool"]), str(value["status"]),
                         str(value["message"]), float(value["started"]), float(value["updated"]))
    except (KeyError, TypeError, ValueError):
        return None


class TaskBook:
    def __init__(self, vault: Vault, clock: Callable[[], float] = time.time) -> None:
        self._vault, self.clock = vault, clock
        self.monotonic = time.monotonic  # when a task may be asked about again
        self._ask_after: dict[tuple[str, str, str], float] = {}  # (owner, server, task id): self.monotonic()

    @classmethod
    def in_memory(cls) -> "TaskBook":
        """A book in this process's memory (a gateway without a vault; `toolbridge tools`)."""
        from cryptography.fernet import Fernet

        from app.state import MemoryVaultBackend

        return cls(Vault(MemoryVaultBackend(), Fernet.generate_key()))

    async def of(self, owner: str) -> list[TaskEntry]:
        """The owner's tasks, oldest first. Raises: StateStoreError."""
        return await self._read(self._name(owner))

    async def find(self, owner: str, server: str, task_id: str) -> TaskEntry | None:
        return next((e for e in await self.of(owner) if (e.server, e.task_id) == (server, task_id)), None)

    def due(self, owner: str, entry: TaskEntry) -> bool:
        """Whether the task's server may be asked about it now (it set no pollInterval, or that has passed)."""
        return self._ask_after.get((owner, entry.server, entry.task_id), 0.0) <= self.monotonic()

    def asked(self, owner: str, server: str, task_id: str, status: str, poll_seconds: float) -> None:
        """The server was just asked about the task: it is `status`, and to be asked again after `poll_seconds`."""
        key = (owner, server, task_id)
        self._ask_after.pop(key, None)
        if status in TASK_ENDED or poll_seconds <= 0:
            return
        if len(self._ask_after) >= MAX_POLL_TIMES:
            del self._ask_after[next(iter(self._ask_after))]
        self._ask_after[key] = self.monotonic() + min(poll_seconds, LONGEST_POLL)

    async def note(self, owner: str, server: str, tool: str, task_id: str, status: str, message: str) -> None:
        """What the server said of the task now; a task not listed yet is added, one whose news is unchanged left
        as it is. Never raises: the page is what a failed write costs."""
        name, now = self._name(owner), self.clock()
        try:
            async with self._vault.holding(name, HOLD_SECONDS):
                entries = await self._read(name)
                known = next((e for e in entries if (e.server, e.task_id) == (server, task_id)), None)
                if known is not None and (known.status, known.message) == (status, message):
                    return
                if known is not None:  # where it was: the list stays in the order the tasks started
                    noted = replace(known, status=status, message=message, updated=now)
                    entries = [noted if entry is known else entry for entry in entries]
                else:
                    entries = [*entries, TaskEntry(server, task_id, tool, status, message, now, now)][-MAX_TASKS:]
                await self._vault.put(name, {"tasks": [asdict(entry) for entry in entries]})
        except StateStoreError as exc:
            log.warning("task_not_listed", server=server, error=str(exc))

    def _name(self, owner: str) -> str:
        return "tasks/" + self._vault.private_name(owner)

    async def _read(self, name: str) -> list[TaskEntry]:
        record: JSONObject | None = await self._vault.get(name)
        listed = record.get("tasks") if record is not None else None
        if not isinstance(listed, list):
            return []
        return [entry for value in listed if (entry := _entry(value)) is not None]
