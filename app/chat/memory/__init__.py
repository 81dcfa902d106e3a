"""Conversation memory: earlier turns' MCP calls and results given back to the model. Inside: `conversation.py` (the
memory a request gets, its stores), `keys.py` (how a conversation is recognised), `entry.py` (what is kept of a turn),
`restore.py` (the history rewritten with them), `grant_book.py` (the person's grants, kept per key). Its face: the
names below."""

from app.chat.memory.conversation import ConversationMemory, MemoryStores
from app.chat.memory.grant_book import GrantBook
from app.chat.memory.keys import digest, memory_owner

__all__ = ["ConversationMemory", "GrantBook", "MemoryStores", "digest", "memory_owner"]
