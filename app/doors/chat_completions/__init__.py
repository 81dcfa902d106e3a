"""The Chat Completions door (`POST /v1/chat/completions`): the chat body as sent, the answer as the tool loop's own
wire format (app/chat/answer/streaming.py); its route is in routes.py."""
