"""Anthropic's Messages API's door (`/v1/messages`): the request made a chat body (request.py, content.py), the
answer spelled as one message (blocks.py, answer.py), its errors (errors.py) and model list (models.py); its
routes and DOOR in routes.py."""
