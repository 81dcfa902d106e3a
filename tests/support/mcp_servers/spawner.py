"""A test MCP server that starts a long-lived helper process and leaves it behind when it exits.

Its stdin closing ends it gracefully, so the SDK never escalates to killing its process group: only a
gateway that cleans up process groups itself leaves no orphan. The helper's pid goes to argv[1].
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


server.run()
