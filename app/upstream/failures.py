"""Transport failures of the upstream in words: what happened, never a library's class names.

Before an answer's head: nobody listening (start a server), no answer in time, or a server that took the
request and closed the connection. After it began: how much of the answer had arrived when it broke off.
"""

from collections.abc import Callable

import aiohttp
import httpx

from app.openai.errors import UpstreamClosed, UpstreamCutOff, UpstreamError, UpstreamTimeout, UpstreamUnreachable

# What a broken read of an answer's body raises, from either transport.
BROKEN_READ = (TimeoutError, httpx.TransportError, aiohttp.ClientError)
# What to tell the client of a failed read, given the failure and how much of the body had arrived.
Failure = Callable[[BaseException, str], UpstreamError]


def failed_before_answer(exc: BaseException, url: str, timeout: float) -> UpstreamError:
    """A transport failure before the answer's head, in words: nobody listening (start a server), no answer
    in time, or a server that took the request and closed the connection (or answered what is not HTTP)."""
    cause = _aiohttp_cause(exc)
    if isinstance(cause, (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError, httpx.ConnectError)):
        return UpstreamUnreachable(url)
    if isinstance(cause, (TimeoutError, httpx.TimeoutException)):
        return UpstreamUnreachable(url) if isinstance(cause, httpx.ConnectTimeout) else UpstreamTimeout(url, timeout)
    if _closed(cause):
        return UpstreamClosed(url)
    return UpstreamClosed(url, "answered with something that is not HTTP")


def broken_read(exc: BaseException, url: str, timeout: float, received: str) -> UpstreamError:
    """A read of an answer that began and then failed (one of BROKEN_READ): a timeout, or a cut-off saying
    how much had arrived (`received`: "12 characters of the answer", "300 bytes of its response")."""
    if isinstance(exc, (httpx.ReadTimeout, TimeoutError)):
        return UpstreamTimeout(url, timeout)
    return UpstreamCutOff("closed the connection" if _closed(exc) else "sent what is not HTTP", received)


def amount(count: int, unit: str) -> str:
    """`1 character of the answer`, `1,024 characters of the answer`: a count in words (`unit` in the plural;
    its first word loses the s for one)."""
    if count != 1:
        return f"{count:,} {unit}"
    noun, space, rest = unit.partition(" ")
    return f"1 {noun.removesuffix('s')}{space}{rest}"


def _closed(exc: BaseException) -> bool:
    """Whether a transport error means the server closed (or reset) the connection."""
    cause = _aiohttp_cause(exc)
    if isinstance(cause, aiohttp.ClientPayloadError):  # a body cut short; not one that failed to decode
        return "not completed" in str(cause)
    if isinstance(cause, httpx.RemoteProtocolError):  # h11's words for a closed connection
        return any(word in str(cause) for word in ("disconnected", "closed", "incomplete"))
    return isinstance(cause, (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError, httpx.ReadError,
                              httpx.WriteError, ConnectionError))


def _aiohttp_cause(exc: BaseException) -> BaseException:
    """The aiohttp error an httpx error stands for (httpx-aiohttp maps a closed connection to ConnectTimeout)."""
    return exc.__cause__ if isinstance(exc.__cause__, aiohttp.ClientError) else exc
