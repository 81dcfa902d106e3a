"""A test MCP server that misbehaves the way real ones do; argv[1] picks how.

garbage:  prints lines that are not JSON-RPC on stdout, then serves
flood:    writes 5 MB to stderr, then serves
stubborn: ignores SIGTERM and keeps running after its stdin closes (only SIGKILL ends it)

In every mode, `garble` writes bytes that are not UTF-8 on the protocol stream itself, then answers.
"""

import os
import signal
import sys
import time

from mcp.server.mcpserver import MCPServer

how = sys.argv[1]
if how == "garbage":
    print("Starting up... (this line is not JSON-RPC)", flush=True)
    print("{not json either", flush=True)
elif how == "flood":
    line = "x" * 999 + "\n"
    for _ in range(5_000):
        sys.stderr.write(line)
    sys.stderr.flush()
elif how == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

server = MCPServer(f"misbehaving-{how}")
protocol = os.dup(1)  # the stdout the client reads, whatever the SDK later does with sys.stdout


@server.tool()
def ping() -> str:
    """Answers pong."""
    return "pong"


@server.tool()
def garble() -> str:
    """Writes a line of bytes that are not UTF-8 where the client reads messages, then answers."""
    os.write(protocol, b"\x00\x01\xff\xfe binary\n")
    return "after garbage"


server.run()
if how == "stubborn":
    while True:
        time.sleep(1)
