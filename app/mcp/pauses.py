"""What a supervised server waits for between two connections (supervisor.py): its backoff after a failure,
or a person's sign-in. Either ends early at shutdown or a stop; a call that wants the server (`live.needed`)
cuts a backoff short (though never under RETRY_WHEN_NEEDED after the last attempt: a dead server is not
hammered) and makes a server waiting for a sign-in look in the vault at once. While connected, a server
signed in looks in the vault as often (`keep_signed_in`): another replica's sign-out or new sign-in."""

import anyio

from app.mcp.live import LiveConnection
from app.mcp.server_auth import ServerAuth
from app.mcp.waits import first_of

# A call for a server that is down cuts its backoff short, but attempts stay at least this far apart.
RETRY_WHEN_NEEDED = 1.0
SIGN_IN_LOOK = 15.0  # how often a server waiting for a sign-in looks whether another replica finished one


async def back_off(live: LiveConnection, stopping: anyio.Event, stop: anyio.Event, delay: float) -> None:
    """Waits `delay` before the next attempt, or less once a call needs the server."""
    earliest = anyio.current_time() + min(delay, RETRY_WHEN_NEEDED)
    needed = live.needed = anyio.Event()
    with anyio.move_on_after(delay):
        await first_of(stopping.wait, stop.wait, needed.wait)
    with anyio.move_on_after(earliest - anyio.current_time()):
        await first_of(stopping.wait, stop.wait)


async def keep_signed_in(auth: ServerAuth | None) -> None:
    """While the connection lives: its sign-in refreshed when due and the vault looked at (shared_tokens.py)."""
    if auth is not None:
        await auth.keep_fresh(SIGN_IN_LOOK)


async def wait_for_sign_in(live: LiveConnection, auth: ServerAuth, stopping: anyio.Event, stop: anyio.Event) -> None:
    """Until the callback stored tokens here, or another replica's are in the vault."""
    while not (stopping.is_set() or stop.is_set()):
        needed = live.needed = anyio.Event()
        with anyio.move_on_after(SIGN_IN_LOOK):
            await first_of(stopping.wait, stop.wait, auth.changed, needed.wait)
        if auth.signed_in or await auth.check_quietly():
            return
