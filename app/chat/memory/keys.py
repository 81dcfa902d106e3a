"""How conversation memory recognises a conversation: the keys its turns are stored under.

A turn's key digests what the next request can compute from its own history and nobody else's: the turn's
visible text (traces removed, whitespace ignored) with every system, user and assistant message before it
(the chain), scoped to the caller (a slow digest of the API key, or "anonymous" without keys) and to Open
WebUI's chat id when it sends one. A mixed turn is keyed by the ids of the client's calls instead, since the
client sends them back. An answer's key (its text alone, in the same scope) says only that a turn with this
text was stored, so that a turn whose earlier messages changed is told apart from one never stored.

Whoever replays a conversation's text under another key or another system message computes other keys:
memory is never shared that way. Keys are digests; nothing here keeps or logs a message.
"""

import functools
import hashlib
from collections.abc import Sequence

from app.chat.answer import strip_trace
from app.chat.asking import Scope, read_answer
from app.openai.schemas import content_text
from app.openai.wire import Message
from app.state import ANONYMOUS

# Each assistant message's index: its key, and its answer's key (None for a mixed turn).
Lookups = dict[int, tuple[str, str | None]]

_OWNER_SALT = b"toolbridge conversation memory owner v1"
_OWNER_ROUNDS = 20_000  # a stored owner digest does not give a weak key away cheaply; computed once a key
# What a key digests of the history: every message the client sees and sends back but its own tools'
# results (`tool`), which clients do not all send back alike. A system message is in: an entry stored
# under one system prompt is not found under another, so no request can plant turns in other chats.
_KEYED_ROLES = frozenset({"system", "developer", "user", "assistant"})
_SLICE = 1 << 20
_WHITESPACE = b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"  # what str.split() splits on below 128


def memory_owner(api_key: str | None) -> str:
    """Whose memory a request reads and writes: a salted, slow digest of the API key it authenticated with
    (never the key), or ANONYMOUS when the gateway has no keys, where every caller shares one memory."""
    return ANONYMOUS if api_key is None else _owner_digest(api_key)


@functools.lru_cache(maxsize=256)  # only keys the guard accepted get here: as many as are configured
def _owner_digest(api_key: str) -> str:
    return hashlib.pbkdf2_hmac("sha256", api_key.encode(), _OWNER_SALT, _OWNER_ROUNDS).hex()


def digest(*parts: str | bytes) -> str:
    hashed = hashlib.sha256()
    for part in parts:
        # a lone surrogate is the upstream's to refuse, not ours
        data = part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part
        hashed.update(len(data).to_bytes(8, "big"))  # lengths first: ("ab", "c") and ("a", "bc") differ
        hashed.update(data)
    return hashed.hexdigest()


ROOT = digest("conversation")  # where every conversation's chain starts


class ConversationKeys:
    """The keys of one caller's conversation (and Open WebUI chat, when it names one)."""

    def __init__(self, owner: str, chat_id: str | None) -> None:
        self._scope = digest("owner", owner or "anonymous", "chat", chat_id or "")

    def lookups(self, messages: Sequence[Message], chain: str) -> tuple[Lookups, str]:
        """Each assistant message's key, and its text's key, by index; and the chain of the whole history,
        continued from `chain`."""
        lookups: Lookups = {}
        for index, message in enumerate(messages):
            role = message.get("role")
            if role not in _KEYED_ROLES:
                continue
            text = normal(content_text(message.get("content")), assistant=role == "assistant")
            if role == "assistant":
                ids = call_ids(message)
                lookups[index] = ((self.mixed(chain, ids), None) if ids
                                  else self.answered_turn(chain, text))
            chain = digest(chain, role, text)
        return lookups, chain

    def turn(self, chain: str, text: bytes) -> str:
        return "turn:" + digest(self._scope, chain, text)

    def answered_turn(self, chain: str, text: bytes) -> tuple[str, str]:
        """The two keys a turn that answered is kept under: its entry's (`turn`) and its answer's (`answer`)."""
        return self.turn(chain, text), self.answer(text)

    def answer(self, text: bytes) -> str:
        return "answer:" + digest(self._scope, text)

    def mixed(self, chain: str, call_ids: list[str]) -> str:
        return "mixed:" + digest(self._scope, chain, *sorted(call_ids))

    def resumed(self, turn_key: str) -> str:
        """Claimed when a waiting turn's calls are run or refused, so that its reply acts once."""
        return "resumed:" + digest(self._scope, turn_key)

    def chat_mark(self, mark: str) -> str:
        """A chat's mark (`exchanges`, `conversation`) within this caller's scope (its key, Open WebUI's chat id), as a
        grant for the chat keeps it: the same opening under another key or in another chat is another chat."""
        return digest(self._scope, "chat", mark)

    def exchanges(self, messages: Sequence[Message], lookups: Lookups, since: int = 0) -> list[str]:
        """The exchanges from `since` on that answered for the chat ("yes for this chat", "never for this chat"): a
        question of the gateway (its turn's key, which digests the whole history before it) and the person's answer
        right after it. Such a grant holds while the history carries its exchange: a new chat that opens the same
        way has none."""
        found = []
        for index, (key, _) in sorted(lookups.items()):
            after = messages[index + 1] if since <= index < len(messages) - 1 else None
            if after is None or after.get("role") != "user":
                continue
            text = content_text(after.get("content"))
            if (answer := read_answer(text)) is not None and answer.scope is Scope.CHAT:
                found.append(digest("exchange", key, normal(text, assistant=False)))
        return found

    def conversation(self, messages: Sequence[Message]) -> str:
        """Open WebUI's chat (its chat id is in the scope), where "for this chat" holds in the whole chat, as that
        chat's system messages and first user message."""
        parts: list[bytes] = []
        for message in messages:
            role = message.get("role")
            if role in ("system", "developer", "user"):
                parts.append(normal(content_text(message.get("content")), assistant=False))
            if role == "user":
                break
        return digest(*parts)


def call_ids(message: Message) -> list[str]:
    return [str(call["id"]) for call in message.get("tool_calls") or [] if isinstance(call, dict) and call.get("id")]


def normal(text: str, *, assistant: bool) -> bytes:
    """The text as a key sees it: traces removed and ASCII whitespace ignored, so that the line breaks a trace
    or a client adds or trims between rounds do not matter. Deleted from the encoded bytes in one C pass:
    `"".join(text.split())` took 0.35 s of the event loop for a 40 MB message, 0.04 s this way."""
    kept = strip_trace(text) if assistant else text
    if len(kept) <= _SLICE:
        return kept.encode("utf-8", "surrogatepass").translate(None, _WHITESPACE)
    # In slices, each a short hold of the GIL: run in a thread, this lets the event loop answer in between.
    return b"".join(kept[start:start + _SLICE].encode("utf-8", "surrogatepass").translate(None, _WHITESPACE)
                    for start in range(0, len(kept), _SLICE))
