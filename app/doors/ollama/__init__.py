"""Ollama's API's door (`/api/`): the chat request made a chat body (request.py, messages.py), the answer as NDJSON
lines or one object (answer.py), the model list (models.py); its routes and DOOR in routes.py."""
