"""The front doors other than Chat Completions: the Responses API, Anthropic's Messages API and Ollama's chat.
Each door turns its request into a chat completion's body for the chat service (app/chat/service.py) and the
answer's parts (app/chat/answer_parts.py) into its own wire format. Pure translation: no I/O, no SDK, no HTTP
client, no web framework; their routes are in app/api/."""
