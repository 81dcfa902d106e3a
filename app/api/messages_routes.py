"""Anthropic's Messages API's door (`POST /v1/messages`): its request made a chat body, the answer spelled as a
message."""

from fastapi import APIRouter

router = APIRouter()
