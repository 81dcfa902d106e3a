"""A client's history rewritten before the upstream sees it: earlier turns given their MCP work back.

Pure: given the history, the keys of its assistant messages and what the store held under them, each
assistant turn gets, in this order of preference, its stored entry (the rounds, the message as the model
wrote it, a mixed turn's own results, and the prompt messages in place of its slash line), or nothing at all
when the gateway answered its slash line itself (the line is left out too), or the rounds its details trace
recorded, or just its text without the trace. Messages of other roles pass as sent.

A turn that asked the person to approve its calls (approvals.py) is given back as the model's message with its
calls. Last in the history, with the person's reply after it, it is the `waiting` turn the loop resumes.
Earlier, a reply of yes, always or no is left out (the model never saw it) and the turn after it holds the
calls' results; any other reply stays, after the calls' results when the turn after it holds them (the round
was decided on the status page), else after results saying the calls did not run.
"""

from collections.abc import Callable
from typing import Any

import structlog

from app.chat.approvals import NOT_ANSWERED, NOT_KEPT, Reply, read_reply
from app.chat.memory_entry import GATEWAY_REPLY, waiting_of
from app.chat.memory_keys import Lookups, call_ids
from app.chat.ports import RestoredHistory, WaitingTurn
from app.chat.trace import RecordedCall, read_back, strip_trace
from app.openai.accumulate import ToolCall
from app.openai.schemas import content_text

log = structlog.get_logger("toolbridge.memory")

Recorded = Callable[[RecordedCall], str]  # a traced call's result as the model read it then


def rewrite_history(messages: list[dict[str, Any]], lookups: Lookups, found: dict[str, bytes],
                    entries: dict[str, dict[str, Any]], recorded: Recorded) -> tuple[RestoredHistory, int]:
    """The history with its earlier turns restored; and how many turns had entries there was no room to read
    (`found` holds b"" for those)."""
    rewrite = _Rewrite(found, entries, recorded)
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            rewrite.other(message)  # a client's own `tool` message is no restored result
            continue
        # A user message just before: the last of `rewrite.messages`, as sent (user messages pass unchanged).
        slash_line = index > 0 and messages[index - 1].get("role") == "user"
        reply = messages[index + 1] if index + 1 < len(messages) else None
        ahead = entries.get(lookups[index + 2][0]) if index + 2 in lookups else None  # the next turn's entry
        rewrite.turn(message, lookups[index], slash_line, reply, last=index + 2 == len(messages), ahead=ahead)
    rewrite.settle()
    return RestoredHistory(rewrite.messages, rewrite.results, rewrite.turns, rewrite.waiting), rewrite.no_room


class _Rewrite:
    """One history's rewrite as it goes: the messages so far, where the restored results are among them,
    and how many turns were restored or had no room."""

    def __init__(self, found: dict[str, bytes], entries: dict[str, dict[str, Any]], recorded: Recorded) -> None:
        self._found, self._entries, self._recorded = found, entries, recorded
        self.messages: list[dict[str, Any]] = []
        self.results: list[int] = []
        self.turns = self.no_room = 0
        self.waiting: WaitingTurn | None = None
        self._skip_reply = False  # the next user message answered a question: the model never saw it
        self._owed: list[str] = []  # ids of a decided turn's calls, whose results the next turn's entry holds
        self._placed: set[str] = set()  # ids of those results already given before the reply (status page)

    def other(self, message: dict[str, Any]) -> None:
        """A message of another role than the assistant's: passed as sent, unless it answered a question."""
        if self._skip_reply and message.get("role") == "user":
            self._skip_reply = False
            return
        self.settle()
        self.messages.append(message)

    def turn(self, message: dict[str, Any], keys: tuple[str, str | None], slash_line: bool,
             reply: dict[str, Any] | None, *, last: bool, ahead: dict[str, Any] | None = None) -> None:
        key, answer_key = keys
        start, owed = len(self.messages), self._owed
        self._skip_reply, self._owed = False, []
        if self._found.get(key) == GATEWAY_REPLY:
            if slash_line:
                self.messages.pop()
                start -= 1
        else:
            entry = self._entries.get(key)
            if entry is not None:
                self._from_entry(message, entry, slash_line)
                self._held(key, entry, reply, last=last, ahead=ahead)
            else:
                self._unstored(message, key, answer_key)
        self._pay(owed, start)

    def _held(self, key: str, entry: dict[str, Any], reply: dict[str, Any] | None, *, last: bool,
              ahead: dict[str, Any] | None) -> None:
        """A turn that asked the person: waiting for the reply that ends the history, or decided earlier (by the
        reply, or on the status page: then the next turn's entry, `ahead`, holds the results, given here)."""
        waiting = waiting_of(entry)
        if waiting is None:
            return
        held = self.messages[-1]
        calls = tuple(ToolCall(str(c["id"]), str(c["function"]["name"]), str(c["function"]["arguments"]))
                      for c in held.get("tool_calls") or [])
        answer = read_reply(content_text(reply.get("content"))) if reply and reply.get("role") == "user" else None
        if last and answer is not None:
            self.waiting = WaitingTurn(key, calls, *waiting)
        elif answer in (Reply.YES, Reply.ALWAYS, Reply.NO):
            self._skip_reply, self._owed = True, [call.id for call in calls]
        elif decided := _results_of(calls, ahead):
            self._placed = {call.id for call in calls}
            for call in calls:
                self._append(decided.get(call.id) or {"role": "tool", "tool_call_id": call.id, "content": NOT_KEPT})
        else:
            for call in calls:
                self._append({"role": "tool", "tool_call_id": call.id, "content": NOT_ANSWERED})

    def _pay(self, owed: list[str], start: int) -> None:
        """Results for a decided turn's calls that the turn after it does not hold (its entry is gone): the
        model must not see calls without results."""
        given = {m.get("tool_call_id") for m in self.messages[start:] if m.get("role") == "tool"}
        missing = [{"role": "tool", "tool_call_id": i, "content": NOT_KEPT} for i in owed if i not in given]
        if missing:
            self.messages[start:start] = missing
            self.results = [i + len(missing) if i >= start else i for i in self.results]
            self.results += range(start, start + len(missing))
            self.results.sort()

    def settle(self) -> None:
        """A decided turn's calls still owed results when no turn follows it: they are paid here."""
        owed, self._owed = self._owed, []
        self._pay(owed, len(self.messages))

    def _from_entry(self, message: dict[str, Any], entry: dict[str, Any], slash_line: bool) -> None:
        self.turns += 1
        if entry.get("prompt") and slash_line:
            self.messages[-1:] = entry["prompt"]
        placed, self._placed = self._placed, set()
        for part in entry["before"]:
            if not (part.get("role") == "tool" and part.get("tool_call_id") in placed):
                self._append(part)
        self.messages.append({**message, **entry["message"]})
        for part in entry["after"]:
            self._append(part)

    def _unstored(self, message: dict[str, Any], key: str, answer_key: str | None) -> None:
        """A turn with no entry to read: from its trace if it has one; else why not, when the store says."""
        from_trace = turn_from_trace(message, self._recorded)
        if len(from_trace) > 1:
            self.turns += 1
        elif self._found.get(key) == b"":
            self.no_room += 1
        elif key in self._found:
            log.warning("turn_not_restored", reason="its stored entry could not be read")
        elif answer_key is not None and answer_key in self._found:
            log.warning("turn_not_restored", reason="the messages before it differ from when it was stored",
                        hint="a client that rewrites earlier messages (a date, RAG context) loses tool memory")
        for part in from_trace:
            self._append(part)

    def _append(self, message: dict[str, Any]) -> None:
        if message.get("role") == "tool":
            self.results.append(len(self.messages))
        self.messages.append(message)


def _results_of(calls: tuple[ToolCall, ...], entry: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The results of a held turn's calls that the entry of the turn after it holds (by call id): a turn that
    answered a message after the round was decided on the status page keeps them."""
    ids = {call.id for call in calls}
    return {part["tool_call_id"]: part for part in (entry or {}).get("before", [])
            if isinstance(part, dict) and part.get("role") == "tool" and part.get("tool_call_id") in ids}


def turn_from_trace(message: dict[str, Any], recorded: Recorded) -> list[dict[str, Any]]:
    """An assistant message with no stored entry: the rounds its details trace recorded, then its text;
    or the message with its trace removed."""
    content = message.get("content")
    if not isinstance(content, str) or not content:
        return [message]
    parts = read_back(content)
    if parts is None:
        stripped = strip_trace(content)
        return [message if stripped == content else {**message, "content": stripped}]
    own = set(call_ids(message))  # a mixed turn's own calls, if it kept them
    messages: list[dict[str, Any]] = []
    text = ""
    for part in parts:
        if isinstance(part, str):
            text += part
            continue
        traced = [call for call in part if call.id not in own]
        if not traced:
            continue
        calls = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                 for c in traced]
        messages.append({"role": "assistant", "content": strip_trace(text).strip(), "tool_calls": calls})
        messages += [{"role": "tool", "tool_call_id": c.id, "content": recorded(c)} for c in traced]
        text = ""
    return [*messages, {**message, "content": strip_trace(text).strip()}]
