"""What the gateway knows about particular clients: Open WebUI's background tasks and user headers."""

from collections.abc import Mapping, Sequence
from urllib.parse import unquote

from app.chat.own_words import TASK_PROMPT_PREFIX, own_words
from app.openai.wire import Message

# Open WebUI asks the same model for titles, tags and follow-ups with prompts that start with TASK_PROMPT_PREFIX.
OPENWEBUI_PREFIX = b"x-openwebui-"  # its forwarded headers' names, as ASGI gives them (lower case)
_OPENWEBUI_HEADERS = {
    "x-openwebui-user-name": "owui_user_name",
    "x-openwebui-user-id": "owui_user_id",
    "x-openwebui-user-email": "owui_user_email",
    "x-openwebui-user-role": "owui_user_role",
    "x-openwebui-chat-id": "owui_chat_id",
    "x-openwebui-message-id": "owui_message_id",
}


def is_background_task(messages: Sequence[Message]) -> bool:
    """An Open WebUI title/tags/follow-up request: the last user message starts with `### Task:`. A person's
    message that Open WebUI's RAG template wraps starts so too, and is none (own_words.py)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return own_words(message.get("content")).lstrip().startswith(TASK_PROMPT_PREFIX)
    return False


def openwebui_fields(headers: Mapping[str, str]) -> dict[str, str]:
    """Open WebUI's forwarded user and chat headers, as log fields (the name arrives URL-quoted)."""
    return {field: unquote(headers[name]) for name, field in _OPENWEBUI_HEADERS.items() if name in headers}



def chat_id(headers: Mapping[str, str]) -> str | None:
    """The chat a request belongs to, when Open WebUI forwards it (ENABLE_FORWARD_USER_INFO_HEADERS)."""
    return headers.get("x-openwebui-chat-id") or None
