"""The chat request: from a parsed body to the events of its answer: tools chosen, memory restored, the loop
with the upstream and the MCP pool, and the answer shaped for the client."""
