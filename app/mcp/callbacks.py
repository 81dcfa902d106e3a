"""What a server tells or asks the gateway in the middle of a call, apart from progress and sampling.

Elicitation is declared (form and URL), because a 2026-era server asks its questions only of a client that
declared it, and refuses the call otherwise: those questions come back as the call's result
(`input_required`, app/mcp/input_rounds.py), for the person to answer in a later request. A 2025-era server
asks instead in the middle of the call (`elicitation/create`), while the call stays open: the call is held for
the person's answer (app/mcp/held_calls.py). Where no call can hold it, the question is declined here, and the
tool goes on as it does for a person who says no."""

from typing import Any

import structlog
from mcp.client import ClientRequestContext
from mcp.types import ElicitRequestParams, ElicitResult, LoggingMessageNotificationParams

log = structlog.get_logger("toolbridge.mcp")


def server_log_forwarder(server: str) -> Any:
    server_log = log.bind(server=server)

    async def forward(params: LoggingMessageNotificationParams) -> None:
        server_log.info("mcp_server_log", level=params.level, logger=params.logger, data=params.data)

    return forward


def declining_elicitation(server: str) -> Any:
    """The elicitation callback: registering it declares the capability; what reaches it is declined."""

    async def decline(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        # Not the message: the server's words for the person stay out of the operator's log; the mode is enough.
        log.info("mcp_elicitation_declined", server=server, mode=params.mode)
        return ElicitResult(action="decline")

    return decline
