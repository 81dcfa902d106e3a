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

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog

from app.chat.answer import RecordedCall, read_back, strip_trace
from app.chat.asking import NOT_ANSWERED, NOT_KEPT, Reply, read_reply
from app.chat.memory.entry import GATEWAY_REPLY, Entry, continues, inputs_of, waiting_of
from app.chat.memory.keys import Lookups, call_ids
from app.chat.ports import InputNeeded, RestoredHistory, WaitingTurn
from app.openai.accumulate import ToolCall
from app.openai.schemas import content_text
from app.openai.wire import Message, ToolCallPart

log = structlog.get_logger("toolbridge.memory")

Recorded = Callable[[RecordedCall], str]  # a traced call's result as the model read it then


def rewrite_history(messages: Sequence[Message], lookups: Lookups, found: dict[str, bytes],
                    entries: dict[str, Entry], recorded: Recorded) -> tuple[RestoredHistory, int]:
    """The history with its earlier turns restored; and how many turns had entries there was no room to read
    (`found` holds b"" for those)."""
    rewrite = _Rewrite(found, entries, recorded)
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            rewrite.other(message, index)  # a client's own `tool` message is no restored result
            continue
        # A user message just before: the last of `rewrite.messages`, as sent (user messages pass unchanged).
        slash_line = index > 0 and messages[index - 1].get("role") == "user"
        at = _reply_at(messages, index, lookups, found)
        reply = messages[at] if at < len(messages) else None
        ahead = entries.get(lookups[at + 1][0]) if at + 1 in lookups else None  # the next turn's entry
        rewrite.turn(message, lookups[index], slash_line, ReplyAt(reply, at, (at - index - 1) // 2),
                     last=at + 1 == len(messages),
                     ahead=ahead)
    rewrite.settle()
    return RestoredHistory(rewrite.messages, rewrite.results, rewrite.turns, rewrite.waiting), rewrite.no_room


def _reply_at(messages: Sequence[Message], index: int, lookups: Lookups, found: dict[str, bytes]) -> int:
    """Where the person's reply to the turn at `index` is: the next message, past any message the gateway
    answered itself (an answer it could not read, asked again): both are left out, as the model never saw them."""
    at = index + 1
    while (at + 1 < len(messages) and messages[at].get("role") == "user" and at + 1 in lookups
           and found.get(lookups[at + 1][0]) == GATEWAY_REPLY):
        at += 2
    return at


@dataclass(frozen=True)
class ReplyAt:
    """The message that follows a turn as its reply (past what the gateway answered itself), and where."""

    message: Message | None
    at: int  # its index in the history as sent
    asked_again: int = 0  # the gateway's own answers before it: an answer it could not read, asked again

    @property
    def text(self) -> str | None:
        """The person's words, when the reply is theirs."""
        if self.message is None or self.message.get("role") != "user":
            return None
        return content_text(self.message.get("content"))


class _Rewrite:
    """One history's rewrite as it goes: the messages so far, where the restored results are among them,
    and how many turns were restored or had no room."""

    def __init__(self, found: dict[str, bytes], entries: dict[str, Entry], recorded: Recorded) -> None:
        self._found, self._entries, self._recorded = found, entries, recorded
        self.messages: list[Message] = []
        self.results: list[int] = []
        self.turns = self.no_room = 0
        self.waiting: WaitingTurn | None = None
        self._skip_at: int | None = None  # the person's reply to a question, which the model never saw
        self._owed: list[str] = []  # ids of a decided turn's calls, whose results the next turn's entry holds
        self._placed: set[str] = set()  # ids of those results already given before the reply (status page)

    def other(self, message: Message, index: int) -> None:
        """A message of another role than the assistant's: passed as sent, unless it answered a question."""
        if index == self._skip_at:
            self._skip_at = None
            return
        if self._skip_at is None:  # before a reply still to come, a decided turn's results are not due yet
            self.settle()
        self.messages.append(message)

    def turn(self, message: Message, keys: tuple[str, str | None], slash_line: bool,
             reply: ReplyAt, *, last: bool, ahead: Entry | None = None) -> None:
        key, answer_key = keys
        if self._found.get(key) == GATEWAY_REPLY:  # left out with its line; a decided turn's debts stand
            if slash_line:
                self.messages.pop()
            return
        start, owed = len(self.messages), self._owed
        self._skip_at, self._owed = None, []
        entry = self._entries.get(key)
        if entry is not None and continues(entry):
            owed = self._continued(key, entry, owed, reply, last=last)
        elif entry is not None:
            self._from_entry(message, entry, slash_line)
            self._held(key, entry, reply, last=last, ahead=ahead)
        else:
            self._unstored(message, key, answer_key)
        self._pay(owed, start)

    def _continued(self, key: str, entry: Entry, owed: list[str], reply: ReplyAt, *, last: bool) -> list[str]:
        """A turn that only asked the person again (the model never saw it): the results of the calls that
        finished, and the calls that asked again still owed theirs, by the turn after the reply. Returns the
        ids owed that are to be paid now."""
        waiting = waiting_of(entry)
        assert waiting is not None  # an unreadable waiting entry is never read (memory_entry.decode)
        for part in entry["before"]:
            self._append(part)
        calls = _calls(entry["message"].get("tool_calls") or [])
        self._questioned(key, calls, waiting[1], inputs_of(entry), reply, last=last)
        asked_again = {call.id for call in calls}
        return [call_id for call_id in owed if call_id not in asked_again]

    def _held(self, key: str, entry: Entry, reply: ReplyAt, *, last: bool,
              ahead: Entry | None) -> None:
        """A turn that asked the person: waiting for the reply that ends the history, or decided earlier (by the
        reply, or on the status page: then the next turn's entry, `ahead`, holds the results, given here)."""
        waiting = waiting_of(entry)
        if waiting is None:
            return
        held = self._held_message(entry)
        calls = _calls(held.get("tool_calls") or [])
        if inputs := inputs_of(entry):
            self._questioned(key, tuple(c for c in calls if c.id in inputs), waiting[1], inputs, reply, last=last)
            return
        answer = read_reply(reply.text) if reply.text is not None else None
        if last and answer is not None:
            self.waiting = WaitingTurn(key, calls, *waiting)
        elif answer in (Reply.YES, Reply.ALWAYS, Reply.NO):
            self._skip_at, self._owed = reply.at, [call.id for call in calls]
        elif decided := _results_of(calls, ahead):
            self._placed = {call.id for call in calls}
            for call in calls:
                self._append(decided.get(call.id) or {"role": "tool", "tool_call_id": call.id, "content": NOT_KEPT})
        else:
            for call in calls:
                self._append({"role": "tool", "tool_call_id": call.id, "content": NOT_ANSWERED})

    def _held_message(self, entry: Entry) -> Message:
        """The held turn's assistant message with its calls, among the messages just added from its entry."""
        after = len(entry["after"])
        return self.messages[-1 - after]

    def _questioned(self, key: str, asked: tuple[ToolCall, ...], asked_at: float, inputs: dict[str, InputNeeded],
                    reply: ReplyAt, *, last: bool) -> None:
        """A turn whose calls came back with the server's questions: the reply, whatever it says, is the
        person's answer, which the model never sees; the calls' results come with the turn after it."""
        if reply.text is None:
            for call in asked:
                self._append({"role": "tool", "tool_call_id": call.id, "content": NOT_ANSWERED})
        elif last:
            self.waiting = WaitingTurn(key, asked, frozenset(inputs), asked_at, inputs, reply.asked_again)
        else:
            self._skip_at, self._owed = reply.at, [call.id for call in asked]

    def _pay(self, owed: list[str], start: int) -> None:
        """Results for a decided turn's calls that the turn after it does not hold (its entry is gone): the
        model must not see calls without results."""
        given = {m.get("tool_call_id") for m in self.messages[start:] if m.get("role") == "tool"}
        missing: list[Message] = [{"role": "tool", "tool_call_id": call_id, "content": NOT_KEPT}
                                  for call_id in owed if call_id not in given]
        if missing:
            self.messages[start:start] = missing
            self.results = [i + len(missing) if i >= start else i for i in self.results]
            self.results += range(start, start + len(missing))
            self.results.sort()

    def settle(self) -> None:
        """A decided turn's calls still owed results when no turn follows it: they are paid here."""
        owed, self._owed = self._owed, []
        self._pay(owed, len(self.messages))

    def _from_entry(self, message: Message, entry: Entry, slash_line: bool) -> None:
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

    def _unstored(self, message: Message, key: str, answer_key: str | None) -> None:
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

    def _append(self, message: Message) -> None:
        if message.get("role") == "tool":
            self.results.append(len(self.messages))
        self.messages.append(message)


def _results_of(calls: tuple[ToolCall, ...], entry: Entry | None) -> dict[str, Message]:
    """The results of a held turn's calls that the entry of the turn after it holds (by call id): a turn that
    answered a message after the round was decided on the status page keeps them."""
    ids = {call.id for call in calls}
    return {call_id: part for part in (entry["before"] if entry is not None else [])
            if part.get("role") == "tool" and (call_id := part.get("tool_call_id", "")) in ids}


def _calls(parts: list[ToolCallPart]) -> tuple[ToolCall, ...]:
    return tuple(ToolCall(str(part["id"]), str(part["function"]["name"]), str(part["function"]["arguments"]))
                 for part in parts)


def turn_from_trace(message: Message, recorded: Recorded) -> list[Message]:
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
    messages: list[Message] = []
    text = ""
    for part in parts:
        if isinstance(part, str):
            text += part
            continue
        traced = [call for call in part if call.id not in own]
        if not traced:
            continue
        calls = [ToolCall(call.id, call.name, call.arguments).to_message_part() for call in traced]
        messages.append({"role": "assistant", "content": strip_trace(text).strip(), "tool_calls": calls})
        messages += [{"role": "tool", "tool_call_id": c.id, "content": recorded(c)} for c in traced]
        text = ""
    return [*messages, {**message, "content": strip_trace(text).strip()}]
