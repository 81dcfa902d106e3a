"""The Responses API's door (`POST /v1/responses`): its request made a chat body, the answer spelled as a response."""

from fastapi import APIRouter

router = APIRouter()
