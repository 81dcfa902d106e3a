"""The front doors onto the tool loop, one sub-package each: Chat Completions, the Responses API, Anthropic's Messages
API and Ollama's chat. Each door turns its request into a chat completion's body for the chat service
(app/chat/service.py) and the answer's parts (app/chat/answer/parts.py) into its own wire format: pure translation,
no I/O, no SDK, no HTTP client, no web framework; but for each door's `routes` module, the HTTP layer's part of the
door, which makes its DOOR (door.py). The list of doors is registry.py."""
