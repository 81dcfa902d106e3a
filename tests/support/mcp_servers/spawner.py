"""A test MCP server that starts a long-lived helper process and leaves it behind when it exits.

Its stdin closing ends it gracefully, so the SDK never escalates to killing its process group: only a
gateway that cleans up process groups itself leaves no orphan. The helper's pid goes to argv[1].
`spawn` starts more, in its group and out of it (setsid), as servers that run tools in subprocesses do.
"""

import subprocess
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
Path(sys.argv[1]).write_text(str(helper.pid))

server = MCPServer("spawner")


@server.tool()
def helper_pid() -> int:
    """The pid of the helper process."""
    return helper.pid


@server.tool()
def spawn(in_group: int = 1, escaping: int = 1) -> list[int]:
    """Starts sleeping helpers: `in_group` in this server's process group, `escaping` in sessions of their own."""
    helpers = [subprocess.Popen(["sleep", "300"]) for _ in range(in_group)]
    helpers += [subprocess.Popen(["sleep", "300"], start_new_session=True) for _ in range(escaping)]
    return [helper.pid for helper in helpers]


@server.tool()
def shout(characters: int) -> str:
    """Writes one stderr line of this many characters, as a server dumping a large blob to its log does."""
    sys.stderr.write("E" * characters + "\n")
    sys.stderr.flush()
    return "shouted"


server.run()
