"""Ollama's API's door (`/api/chat`, `/api/tags`, `/api/show`, `/api/version`)."""

from fastapi import APIRouter

router = APIRouter()
