"""What the gateway knows about particular clients: a user message's own words past what clients wrap around
them, and Open WebUI's background tasks and user headers.

A user message's own words: what the person typed, past what their client wrapped around it. Read wherever the
gateway takes a message as meant for itself (a slash command, a yes or no, an answer to a server's question, and
whether it is Open WebUI's background task); what the model is sent is never changed here.

- Claude Code puts `<system-reminder>...</system-reminder>` blocks into the person's message (always into its
  first one, and first in it): every closed block is left out, wherever it is.
- Open WebUI, when a chat has files or web results, writes its RAG template before the person's words in the same
  message: `### Task:` ... `<context>...</context>`, then the message. What follows the last `</context>` is the
  person's; an older template's `<user_query>...</user_query>` repeats them first, and is left out too. Its title,
  tags and follow-up prompts also start `### Task:`, but quote the chat in `<chat_history>` before any context:
  those are the gateway's to recognise (`is_background_task`), and stay whole.

Linear in the message's length whatever it holds (`str.find`, no pattern that backtracks): a message of a million
unclosed tags costs one pass.
"""

import re
from collections.abc import Mapping, Sequence
from urllib.parse import unquote

from app.openai.schemas import content_text
from app.openai.wire import Message

REMINDER_OPENING = "<system-reminder>"
REMINDER_CLOSING = "</system-reminder>"
TASK_PROMPT_PREFIX = "### Task:"
_TASK_START = re.compile(r"\s*+### Task:")  # possessive: whitespace is never tried again
_LEADING_SPACE = 1024  # characters of whitespace a wrapper may start with: a message of 40 MB of blanks is none
_CONTEXT_OPENING, _CONTEXT_CLOSING = "<context>", "</context>"
_CHAT_HISTORY = "<chat_history>"
_QUERY_START = re.compile(r"\s*+<user_query>")
_QUERY_CLOSING = "</user_query>"


def own_words(content: object) -> str:
    """The person's words in a message's content (a string, or text parts): the text with the wrappers above left
    out, its whitespace as it was. The text itself, not a copy, when nothing wraps it."""
    text = content_text(content)
    if REMINDER_OPENING in text:
        text = _without_reminders(text)
    return _past_rag_template(text)


def _without_reminders(text: str) -> str:
    kept: list[str] = []
    position = 0
    while (opening := text.find(REMINDER_OPENING, position)) >= 0:
        closing = text.find(REMINDER_CLOSING, opening + len(REMINDER_OPENING))
        if closing < 0:
            break  # no later opening is closed either: the rest stays as it is
        kept.append(text[position:opening])
        position = closing + len(REMINDER_CLOSING)
    kept.append(text[position:])
    return "".join(kept)


def _past_rag_template(text: str) -> str:
    """The words after Open WebUI's RAG template, when the message starts with one; else the text."""
    if not _TASK_START.match(text, 0, _LEADING_SPACE):
        return text
    context = text.find(_CONTEXT_OPENING)
    if context < 0 or text.find(_CHAT_HISTORY, 0, context) >= 0:
        return text  # a background task's prompt, not a person's message
    end = text.rfind(_CONTEXT_CLOSING)
    if end < context:
        return text
    words = text[end + len(_CONTEXT_CLOSING):]
    query = _QUERY_START.match(words, 0, _LEADING_SPACE)
    if query is not None and (closing := words.find(_QUERY_CLOSING, query.end())) >= 0:
        words = words[closing + len(_QUERY_CLOSING):]
    return words


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
    message that Open WebUI's RAG template wraps starts so too, and is none (`own_words`)."""
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
