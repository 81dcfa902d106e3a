"""Asking the person: a call that waits for their yes (the question, their reply read as yes, always, no or something
else) and a server's question (MCP elicitation: the words that ask it, the reply read as the answer, each form field
typed and checked). Pure; the loop holds the round (`app/chat/loop/pausing.py`). Its face: the names below."""

from app.chat.asking.approvals import (
    DECLINED,
    NOT_ANSWERED,
    NOT_KEPT,
    AskedCall,
    Reply,
    looks_like_question,
    new_reference,
    no_longer_waiting,
    question,
    read_reply,
    too_late,
)
from app.chat.asking.question_fields import Value as FormValue
from app.chat.asking.questions import Accepted, Answer, Cancelled, Invalid, answer_for, asked_again, question_for

__all__ = [
    "DECLINED",
    "NOT_ANSWERED",
    "NOT_KEPT",
    "Accepted",
    "Answer",
    "AskedCall",
    "Cancelled",
    "FormValue",
    "Invalid",
    "Reply",
    "answer_for",
    "asked_again",
    "looks_like_question",
    "new_reference",
    "no_longer_waiting",
    "question",
    "question_for",
    "read_reply",
    "too_late",
]
