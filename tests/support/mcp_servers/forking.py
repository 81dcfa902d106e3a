"""basic.py over streamable HTTP, plus `hold`: a tool whose helper process keeps the server's connections
open (not its listener) after the server dies, as a forked worker or a stray child can.

Run: `python forking.py http PORT`.
"""

import os
import socket
import sys
import time
from pathlib import Path

import anyio
from basic import server


def _keep_connections_close_listeners() -> None:
    for fd in range(3, 1024):
        try:
            sock = socket.socket(fileno=fd)
        except OSError:
            continue
        try:
            listening = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
        except OSError:
            listening = 0
        if listening:
            sock.close()  # so that the port refuses connections once the server is gone
        else:
            sock.detach()


@server.tool()
async def hold(seconds: float, marker: str) -> str:
    """Starts a helper holding this server's connections for `seconds`, writes its pid to `marker`, sleeps."""
    helper = os.fork()
    if helper == 0:
        _keep_connections_close_listeners()
        time.sleep(seconds)
        os._exit(0)
    Path(marker).write_text(str(helper))
    await anyio.sleep(seconds)
    return "held"


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
