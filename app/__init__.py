"""toolbridge: an OpenAI-compatible gateway that runs MCP tools for a local LLM."""

__version__ = "0.1.0"
