"""What a server may ask of the gateway, or tell it, in the middle of a call, apart from sampling."""

from typing import Any

import structlog
from mcp.types import ElicitRequestParams, ElicitResult, LoggingMessageNotificationParams

log = structlog.get_logger("toolbridge.mcp")


def decline_elicitation(server: str) -> Any:
    """Nobody is there to answer a server's question in the middle of a chat request: decline, and say so."""

    async def decline(_context: Any, params: ElicitRequestParams) -> ElicitResult:
        log.info("mcp_elicitation_declined", server=server, message=getattr(params, "message", None))
        return ElicitResult(action="decline")

    return decline


def server_log_forwarder(server: str) -> Any:
    server_log = log.bind(server=server)

    async def forward(params: LoggingMessageNotificationParams) -> None:
        server_log.info("mcp_server_log", level=params.level, logger=params.logger, data=params.data)

    return forward
