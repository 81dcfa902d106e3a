"""The model server as people see it: whether it answers and since when, and the models it has loaded with their
context (LM Studio's REST API says which are loaded; another server, what it lists).

Looked at when someone asks (the status page, /health, a model list, the start-up line), at most every
LOOK_SECONDS, never on a chat's path: a page or monitor polling keeps `since` true to a few seconds, and the model
server's own log sees no request while nobody looks. What a model list meets on its way (an answer, a refusal to
connect) counts as a look too.
"""

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NotRequired, TypedDict

import structlog

from app.openai.errors import UpstreamStatusError, UpstreamUnreachable
from app.upstream.capabilities import Capabilities
from app.upstream.transport import UpstreamHttp

log = structlog.get_logger("toolbridge.upstream")

LOOK_SECONDS = 5.0  # a look older than this is taken again when someone asks
WAIT_SECONDS = 1.0  # what /health waits for a look under way; a server that takes longer shows the last look


class ModelShown(TypedDict):
    """A model in /health's `upstream.models`."""

    id: str
    context_length: int | None
    loaded: bool | None


class UpstreamShown(TypedDict):
    """The upstream's state in /health and on the status page (`error` only while there is one)."""

    reachable: bool | None
    since: float | None
    checked_at: float | None
    for_seconds: float | None
    models: list[ModelShown]
    models_at: float | None
    error: NotRequired[str]


@dataclass(frozen=True)
class ModelSeen:
    """One model as the server said it: its name, its context (the loaded one where it is loaded), and whether it
    is loaded (None: the server does not say)."""

    id: str
    context_length: int | None
    loaded: bool | None

    def describe(self) -> ModelShown:
        return {"id": self.id, "context_length": self.context_length, "loaded": self.loaded}


@dataclass(frozen=True)
class UpstreamState:
    """What the last look saw: `reachable` None before the first; `since` when it became so (Unix time); `problem`
    why it does not answer, or what it answered to the model list; the models as last seen while it answered."""

    reachable: bool | None = None
    since: float | None = None
    checked_at: float | None = None
    problem: str | None = None
    models: tuple[ModelSeen, ...] = ()
    models_at: float | None = None

    def describe(self, now: float) -> UpstreamShown:
        """For /health and the status page: times in Unix seconds, and how long it has been so."""
        shown: UpstreamShown = {"reachable": self.reachable, "since": self.since, "checked_at": self.checked_at,
                                 "for_seconds": None if self.since is None else round(now - self.since, 1),
                                 "models": [model.describe() for model in self.models], "models_at": self.models_at}
        if self.problem:
            shown["error"] = self.problem
        return shown


class UpstreamWatch:
    """One upstream's state, looked at on demand (`fresh`, `look`) and told what requests met (`saw`)."""

    def __init__(self, http: UpstreamHttp, capabilities: Capabilities, clock: Callable[[], float] = time.time) -> None:
        self._http = http
        self._capabilities = capabilities
        self._clock = clock
        self.state = UpstreamState()
        self._looking: asyncio.Task[UpstreamState] | None = None
        self._looked_at: float | None = None  # a whole look's: what requests meet says nothing of the models

    async def fresh(self, wait: float = WAIT_SECONDS) -> UpstreamState:
        """The state, looked at again when the last look is older than LOOK_SECONDS: waited for up to `wait`
        seconds (a server that refuses or answers does so at once), else the last look's while this one goes on."""
        if self._looked_at is not None and self._clock() - self._looked_at < LOOK_SECONDS:
            return self.state
        if self._looking is None or self._looking.done():
            self._looking = asyncio.create_task(self.look(), name="upstream:look")
        await asyncio.wait([self._looking], timeout=wait)
        return self.state

    async def look(self) -> UpstreamState:
        """Asks the server now: LM Studio's REST API (its models, loaded or not), else the model list."""
        self._looked_at = self._clock()
        if self.state.reachable is not True:
            self._capabilities.forget()
        lmstudio = await self._capabilities.lmstudio_models_now()
        if lmstudio is None:
            self.saw(False, UpstreamUnreachable(self._http.base_url).message)
        elif lmstudio:
            models = [ModelSeen(m.key, m.context_length, m.loaded) for m in lmstudio]
            self.saw(True, models=tuple(sorted(models, key=lambda m: (not m.loaded, m.id))))
        else:
            await self._look_at_model_list()
        return self.state

    async def _look_at_model_list(self) -> None:
        response = await self._http.probe("models", beside=False)
        if response is None:
            self.saw(False, UpstreamUnreachable(self._http.base_url).message)
            return
        if response.status_code != 200:
            refused = UpstreamStatusError(response.status_code, response.content).message
            self.saw(True, f"It answered {response.status_code} to GET /models: {refused}")
            return
        try:
            listed = response.json().get("data") or []
        except (ValueError, AttributeError):
            listed = []
        names = [entry["id"] for entry in listed if isinstance(entry, dict) and isinstance(entry.get("id"), str)]
        # llama.cpp serves one model whatever a request names, with the context of /props.
        context = await self._capabilities.context_length(None) if names else None
        self.saw(True, models=tuple(ModelSeen(name, context, None) for name in names))

    def saw(self, reachable: bool, problem: str | None = None, models: tuple[ModelSeen, ...] | None = None) -> None:
        """What a look or a request met: an answer (`reachable`, `problem` what was wrong with it) or none
        (`problem` why); `models` when it listed them."""
        now = self._clock()
        before = self.state
        state = replace(before, reachable=reachable, checked_at=now, problem=problem,
                        since=before.since if before.reachable == reachable else now)
        self.state = state if models is None else replace(state, models=models, models_at=now)
        if before.reachable is True and not reachable:
            log.warning("upstream_unreachable", url=self._http.base_url, error=problem)
        elif before.reachable is False and reachable:
            log.info("upstream_reachable", url=self._http.base_url, after_seconds=round(now - (before.since or now)))
        if reachable and before.reachable is False and models is None:  # a request met it: a look asks afresh
            self._capabilities.forget()  # what was remembered while it was away is no answer; perhaps another server

    async def aclose(self) -> None:
        if self._looking is not None:
            self._looking.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._looking
