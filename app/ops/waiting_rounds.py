"""The rounds waiting for the person's yes in this process, for the status page (`GET /ui/waiting`): a bounded
list, each round with a short random id the page answers by (`POST /ui/waiting/{id}`).

A round's memory key (where its turn waits in the state store) stays here: the page sees only the id, and a
verdict is written beside the turn, under `verdict_key`, where the chat's next message reads it
(app/chat/loop/held.py). Each round belongs to the memory owner that asked it (a digest of the API key,
"" without keys): the page lists and decides only its caller's own. A round leaves the list when the chat takes
it up, when it is older than TOOLBRIDGE_CONFIRM_TIMEOUT, or when the same owner's newer rounds push it out: each
owner has a share of its own, so no key can push another's rounds off the page.
"""

import hashlib
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal, TypedDict

WAITING_PER_OWNER = 50  # rounds listed for one owner; past it, that owner's oldest leave the list
Verdict = Literal["approve", "deny"]
VERDICTS: tuple[Verdict, ...] = ("approve", "deny")
# What a verdict's place holds once decided on the page; anything else there is a chat message's mark.
VERDICT_VALUES = frozenset(verdict.encode() for verdict in VERDICTS)


def verdict_key(turn_key: str) -> str:
    """Where the verdict on the round kept under `turn_key` is stored (the store never overwrites: the first
    verdict stands)."""
    return "verdict:" + hashlib.sha256(turn_key.encode()).hexdigest()


@dataclass(frozen=True)
class WaitingCall:
    tool: str
    server: str | None
    arguments: str  # JSON text, as the model wrote it


class CallShown(TypedDict):
    tool: str
    server: str | None
    arguments: str


class RoundShown(TypedDict):
    """A waiting round as the status page is given it."""

    id: str
    reference: str
    asked_at: float
    decided: Verdict | None
    calls: list[CallShown]


@dataclass
class WaitingRound:
    id: str
    turn_key: str  # never shown: with it a verdict could be written for the round
    owner: str
    asked_at: float  # seconds since the epoch
    calls: tuple[WaitingCall, ...]
    reference: str = ""  # the question's, as the chat shows it ("Approval 3f9c2a1b"), to tell rounds apart
    verdict: Verdict | None = None

    def shown(self) -> RoundShown:
        """What the page is given."""
        return {"id": self.id, "reference": self.reference, "asked_at": self.asked_at, "decided": self.verdict,
                "calls": [{"tool": c.tool, "server": c.server, "arguments": c.arguments} for c in self.calls]}


class WaitingRounds:
    def __init__(self, per_owner: int = WAITING_PER_OWNER, max_age_seconds: float = 3600.0) -> None:
        self._rounds: OrderedDict[str, WaitingRound] = OrderedDict()  # by id, oldest first
        self._per_owner = per_owner
        self._max_age = max_age_seconds

    def add(self, turn_key: str, owner: str, calls: list[WaitingCall], reference: str = "") -> None:
        """A round asked the person; asked again under the same key (a retried request), it is listed once."""
        self._forget_old()
        if any(held.turn_key == turn_key for held in self._rounds.values()):
            return
        held = WaitingRound(secrets.token_urlsafe(9), turn_key, owner, time.time(), tuple(calls), reference)
        self._rounds[held.id] = held
        owners = [round_id for round_id, listed in self._rounds.items() if listed.owner == owner]
        for round_id in owners[:-self._per_owner]:
            del self._rounds[round_id]

    def of(self, owner: str) -> list[WaitingRound]:
        """The owner's rounds, oldest first."""
        self._forget_old()
        return [held for held in self._rounds.values() if held.owner == owner]

    def everyone(self) -> list[WaitingRound]:
        """Every owner's rounds, oldest first (the webhook's: app/notify/webhook.py)."""
        self._forget_old()
        return list(self._rounds.values())

    def find(self, round_id: str, owner: str) -> WaitingRound | None:
        """The owner's round with this id; None for another owner's, as for one that does not exist."""
        self._forget_old()
        held = self._rounds.get(round_id)
        return held if held is not None and held.owner == owner else None

    def taken_up(self, turn_key: str) -> None:
        """The chat took the round up: it leaves the list."""
        for round_id in [i for i, held in self._rounds.items() if held.turn_key == turn_key]:
            del self._rounds[round_id]

    def _forget_old(self) -> None:
        oldest = time.time() - self._max_age
        for round_id in [i for i, held in self._rounds.items() if held.asked_at < oldest]:
            del self._rounds[round_id]
