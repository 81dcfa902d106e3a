"""What the SDK's OAuth provider needs beside it when one sign-in is shared: by the replicas of a gateway (each
refresh token works once, so a replica whose token expired first takes the tokens another one refreshed, and a
refresh that lost that race is not a sign-in taken back), and with the authorization server at sign-out (the
tokens are revoked there, RFC 7009, or another replica's connection would refresh them back into the vault:
server_auth.py's `revoke_tokens`, as the requests are made there).
(The SDK's own log of the exceptions out of its flow, the stop at the browser that starts every sign-in
among them, never reaches the gateway's log: app/logging.py.)
"""

from collections.abc import AsyncGenerator
from typing import Any

from mcp.client.auth import OAuthClientProvider

from app.mcp.oauth_storage import VaultTokenStorage


class TokensSuperseded(Exception):
    """A refresh refused because another replica spent the refresh token first: the request fails, the sign-in
    stands, and the provider goes on with the tokens that replica stored."""

    def __init__(self, server: str) -> None:
        super().__init__(f"MCP server '{server}': another replica refreshed the sign-in first; try again")


class SharedSignIn(OAuthClientProvider):
    """The SDK's provider, which first takes the tokens another replica refreshed when its own have expired,
    rather than spend a refresh token that replica spent already (`VaultTokenStorage.take_newer`)."""

    # Typed loosely: the import contract keeps httpx2 to the modules that make requests (server_auth.py's).
    async def _auth_flow(self, request: Any) -> AsyncGenerator[Any, Any]:
        storage = self.context.storage
        if self._initialized and not self.context.is_token_valid() and isinstance(storage, VaultTokenStorage):
            await storage.take_newer()
        flow = super()._auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                try:
                    outgoing = await flow.asend(response)
                except StopAsyncIteration:
                    return
        finally:
            # Closed here, in this task: left to the garbage collector, the SDK's flow would release its lock
            # from another task ("The current task is not holding this lock").
            await flow.aclose()
