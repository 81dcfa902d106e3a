"""Conversation memory: earlier turns' MCP calls and results given back to the model. Inside: `conversation.py` (the
memory a request gets, its stores), `keys.py` (how a conversation is recognised), `entry.py` (what is kept of a turn),
`restore.py` (the history rewritten with them). Its face: the names below."""

from app.chat.memory.conversation import ConversationMemory, MemoryStores
from app.chat.memory.keys import digest, memory_owner

__all__ = ["ConversationMemory", "MemoryStores", "digest", "memory_owner"]
