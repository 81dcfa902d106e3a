"""A test MCP server that fails to start, explaining why on stderr as real servers do."""

import sys

print("fatal: GITHUB_TOKEN is not set", file=sys.stderr, flush=True)
sys.exit(1)
