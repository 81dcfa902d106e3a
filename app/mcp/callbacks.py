"""What a server tells the gateway in the middle of a call, apart from progress.

Elicitation is not declared: nobody is there to answer a server's question in the middle of a chat
request, and a server that knows it cannot ask leaves out the tools that only ask (server-everything's
`trigger-elicitation-request`), so the model is never offered a tool that cannot work."""

from typing import Any

import structlog
from mcp.types import LoggingMessageNotificationParams

log = structlog.get_logger("toolbridge.mcp")


def server_log_forwarder(server: str) -> Any:
    server_log = log.bind(server=server)

    async def forward(params: LoggingMessageNotificationParams) -> None:
        server_log.info("mcp_server_log", level=params.level, logger=params.logger, data=params.data)

    return forward
