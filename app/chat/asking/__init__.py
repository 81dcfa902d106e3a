"""Asking the person: a call that waits for their yes (the question, their reply read as yes, always, no or something
else) and a server's question (MCP elicitation: the words that ask it, the reply read as the answer, each form field
typed and checked). Pure; the loop holds the round (`app/chat/loop/pausing.py`). Its face: the names below."""

from app.chat.asking.approvals import (
    DECLINED,
    DECLINED_IN_ADVANCE,
    NOT_ANSWERED,
    NOT_KEPT,
    Answer,
    AskedCall,
    Reply,
    Scope,
    edited_note,
    looks_like_question,
    new_reference,
    no_longer_waiting,
    outside,
    question,
    read_answer,
    read_reply,
    too_late,
)
from app.chat.asking.grants import Grant, decided_by, grant_from_json, grants_for, parsed_arguments, within
from app.chat.asking.question_fields import Value as FormValue
from app.chat.asking.questions import Accepted, Cancelled, Invalid, answer_for, asked_again, question_for
from app.chat.asking.questions import Answer as FormAnswer

__all__ = [
    "DECLINED",
    "DECLINED_IN_ADVANCE",
    "NOT_ANSWERED",
    "NOT_KEPT",
    "Accepted",
    "Answer",
    "AskedCall",
    "Cancelled",
    "FormAnswer",
    "FormValue",
    "Grant",
    "Invalid",
    "Reply",
    "Scope",
    "answer_for",
    "asked_again",
    "decided_by",
    "edited_note",
    "grant_from_json",
    "grants_for",
    "looks_like_question",
    "new_reference",
    "no_longer_waiting",
    "outside",
    "parsed_arguments",
    "question",
    "question_for",
    "read_answer",
    "read_reply",
    "too_late",
    "within",
]
