"""The stdio transport: the MCP SDK's own process handling (spawn, the spec's shutdown sequence, the kill
of the process tree), with a reader of the server's stdout that takes linear time and a bounded size.

The SDK's reader joins each chunk to all that came before it of the line (`(buffer + chunk).split`), so a
32 MB answer cost 25 s of CPU with the event loop frozen, and nothing bounded a line: a server could make
the gateway hold any amount. Here a line is gathered in pieces, joined once, parsed off the event loop
when it is large, and one over `max_bytes` is read past and never held: the call it answers fails with a
message saying why.
"""

import json
import re
import sys
from collections.abc import AsyncGenerator, AsyncIterable, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TextIO

import anyio
import anyio.lowlevel
import mcp_types as types
import structlog
from mcp.client._transport import TransportStreams
from mcp.client.stdio import (
    _WRITER_FLUSH_TIMEOUT,
    StdioServerParameters,
    _aclose_all,
    _create_platform_compatible_process,
    _drain_stdout,
    _get_executable_command,
    _stop_server_process,
    get_default_environment,
)
from mcp.os.win32.utilities import ServerProcess
from mcp.shared.message import SessionMessage
from mcp.types import INTERNAL_ERROR, ErrorData, JSONRPCError

log = structlog.get_logger("toolbridge.mcp")

DEFAULT_MAX_MESSAGE_BYTES = 16 << 20  # TOOLBRIDGE_MCP_MESSAGE_MB
# Lines longer than this are parsed in a worker thread: pydantic holds the event loop for their whole parse.
PARSE_IN_THREAD_BYTES = 1 << 20
# Servers written with an MCP SDK put the id right after "jsonrpc"; it is looked for this far into a line.
_ID_WITHIN = 256
_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,128}")')

class _SessionGone(Exception):
    """The session stopped reading: what the server still writes is drained, not delivered."""


Deliver = Callable[[SessionMessage | Exception], Awaitable[None]]


async def read_messages(
    chunks: AsyncIterable[bytes], deliver: Deliver, *, max_bytes: int, server: str, encoding: str = "utf-8",
    errors: str = "replace",
) -> None:
    """Delivers each newline-ended message of `chunks`: parsed, or the parse error; one over `max_bytes`
    becomes the error answer to the request it answers (when its id can be found), and is never held."""
    pieces: list[bytes] = []
    held = 0
    oversized: bytes | None = None  # the start of a line past the bound, kept to find its id
    async for chunk in chunks:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            piece = chunk[start:end]
            if oversized is None and held + len(piece) > max_bytes:
                oversized = (b"".join(pieces) + piece[:_ID_WITHIN])[:_ID_WITHIN]
            if oversized is not None:
                await _refuse_oversized(oversized, deliver, max_bytes, server)
            else:
                pieces.append(piece)
                await deliver(await _parse(b"".join(pieces), encoding, errors))
            pieces, held, oversized = [], 0, None
            start = end + 1
        rest = chunk[start:]
        if oversized is None and held + len(rest) > max_bytes:
            oversized = (b"".join(pieces) + rest[:_ID_WITHIN])[:_ID_WITHIN]
            pieces, held = [], 0
        elif oversized is None and rest:
            pieces.append(rest)
            held += len(rest)


async def _parse(line: bytes, encoding: str, errors: str) -> SessionMessage | Exception:
    if len(line) > PARSE_IN_THREAD_BYTES:
        return await anyio.to_thread.run_sync(_parse_line, line, encoding, errors)
    return _parse_line(line, encoding, errors)


def _parse_line(line: bytes, encoding: str, errors: str) -> SessionMessage | Exception:
    try:
        text = line.decode(encoding, errors)
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(text, by_name=False))
    except ValueError as exc:  # the session reports it (a banner on stdout, a broken message)
        return exc


async def _refuse_oversized(start: bytes, deliver: Deliver, max_bytes: int, server: str) -> None:
    limit = f"{max_bytes / (1 << 20):g} MiB"
    found = _ID.search(start)
    log.warning("mcp_message_too_large", server=server, limit=limit, answers_request=found is not None)
    if found is None:
        await deliver(ValueError(f"a message over {limit} was dropped"))
        return
    request_id = json.loads(found.group(1))
    message = (f"its answer is over {limit}, more than toolbridge reads from a server "
               "(TOOLBRIDGE_MCP_MESSAGE_MB)")
    await deliver(SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id,
                                              error=ErrorData(code=INTERNAL_ERROR, message=message))))


@asynccontextmanager
async def stdio_client(
    server: StdioServerParameters, *, name: str, max_message_bytes: int, errlog: TextIO = sys.stderr
) -> AsyncGenerator[TransportStreams, None]:
    """`mcp.client.stdio.stdio_client` (mcp 2.x) with `read_messages` as its stdout reader; the rest is
    the SDK's code, step for step, so that the spawn and the shutdown stay the SDK's."""
    command = await _get_executable_command(server.command)
    process = await _create_platform_compatible_process(
        command=command, args=server.args, env=get_default_environment() | (server.env or {}),
        errlog=errlog, cwd=server.cwd,
    )
    # No awaits from the spawn until the task group is entered: a cancellation there would leak the process.
    pipes = _Pipes(process, server, name, max_message_bytes)
    async with anyio.create_task_group() as tg:
        tg.start_soon(pipes.read_stdout)
        tg.start_soon(pipes.write_stdin)
        try:
            yield pipes.read_stream, pipes.write_stream
        finally:
            pipes.shutting_down = True
            with anyio.CancelScope(shield=True):  # every wait inside is bounded; the process must not leak
                await pipes.shutdown()
            tg.cancel_scope.cancel()
    await anyio.lowlevel.cancel_shielded_checkpoint()


class _Pipes:
    """The session's streams to and from one server process: its stdout read into messages, messages
    written to its stdin, and the spec's shutdown of both and of the process."""

    def __init__(self, process: ServerProcess, server: StdioServerParameters, name: str,
                 max_message_bytes: int) -> None:
        self._process, self._server, self._name, self._max_bytes = process, server, name, max_message_bytes
        self._read_writer, self.read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        self.write_stream, self._write_reader = anyio.create_memory_object_stream[SessionMessage](0)
        self.shutting_down = False
        self._writer_done = anyio.Event()

    async def _deliver(self, message: SessionMessage | Exception) -> None:
        try:
            await self._read_writer.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise _SessionGone from None

    async def read_stdout(self) -> None:
        process, server = self._process, self._server
        assert process.stdout, "Opened process is missing stdout"
        try:
            async with self._read_writer:
                try:
                    await read_messages(process.stdout, self._deliver, max_bytes=self._max_bytes, server=self._name,
                                        encoding=server.encoding, errors=server.encoding_error_handler)
                except _SessionGone:
                    pass  # only the drain below remains
                finally:
                    await _drain_stdout(process)
        except anyio.ClosedResourceError:
            pass  # our own shutdown closed the stdout stream under the read
        except (anyio.BrokenResourceError, ConnectionError):
            if not self.shutting_down:
                log.exception("mcp_stdout_failed", server=self._name)

    async def write_stdin(self) -> None:
        process, server = self._process, self._server
        assert process.stdin, "Opened process is missing stdin"
        try:
            async with self._write_reader:
                async for session_message in self._write_reader:
                    text = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((text + "\n").encode(server.encoding, server.encoding_error_handler))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server may still be alive: close the read stream so that the session sees the end.
            await self._read_writer.aclose()
        finally:
            self._writer_done.set()

    async def shutdown(self) -> None:
        self.read_stream.close()  # unblocks the reader into its drain, so that a server stuck writing can exit
        self.write_stream.close()
        with anyio.move_on_after(_WRITER_FLUSH_TIMEOUT) as flush_scope:
            await self._writer_done.wait()
        if flush_scope.cancelled_caught:
            await anyio.lowlevel.cancel_shielded_checkpoint()
        await _stop_server_process(self._process)
        await _aclose_all(self.read_stream, self.write_stream, self._read_writer, self._write_reader)
        await anyio.lowlevel.checkpoint()
