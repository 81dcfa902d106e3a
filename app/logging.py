"""structlog setup: one renderer on stderr for structlog and stdlib logging, values bounded, secrets redacted.
The record of each request is app/api/request_log.py."""

import contextlib
import logging
import re
import sys
from collections.abc import Callable, Iterable

import structlog
from structlog.typing import EventDict, Processor, ProcessorReturnValue, WrappedLogger

# One value in a log line is cut past this many characters: an error must not write thousands of lines.
MAX_FIELD_CHARS = 8_000
REDACTED = "[redacted]"
# Credentials whatever they are: bearer tokens and key-like headers, in any log line.
_CREDENTIAL = re.compile(
    r"(?i)(bearer\s+|(?:x-api-key|api-key|api_key|authorization)['\"]?\s*[:=]\s*['\"]?(?:bearer\s+)?)[^\s'\",}]+"
)


def configure_logging(log_format: str, level: str, secrets: Iterable[str] = ()) -> None:
    """One renderer on stderr for structlog's lines and stdlib logging's (uvicorn, mcp).

    Tracebacks are plain, without local variables (those hold keys, and rendering them with `rich`
    took seconds on the event loop); every value is bounded; `secrets` and anything that looks like a
    credential are replaced in the finished line, whatever wrote them."""
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    render = _redacting(_renderer(log_format), secrets)
    root = logging.getLogger()
    root.setLevel(level.upper())
    structlog.configure(
        # Our own lines go straight to stderr, an event below the level dropped before it is stamped and merged.
        # Through stdlib logging each line made two LogRecords and walked the stack for a file and line that no
        # renderer prints: a quarter of a line's cost, and a line is written for every request and tool call.
        processors=[*shared, render],
        wrapper_class=structlog.make_filtering_bound_logger(root.level),
        logger_factory=lambda *_: _StderrLines(sys.stderr),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)  # what other libraries log (uvicorn, the mcp SDK, httpx)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, render],
        )
    )
    handler.addFilter(without_sign_in_tracebacks)
    root.handlers[:] = [handler]
    _quiet_libraries(root.level)


class _StderrLines(structlog.WriteLogger):
    """A line that cannot be written (the log's reader gone, its pipe full or closed) is dropped, as stdlib logging's
    handler drops it: a log line must never fail the request it tells of."""

    def msg(self, message: str) -> None:
        with contextlib.suppress(OSError, ValueError):  # ValueError: written to a closed file
            super().msg(message)

    log = debug = info = warn = warning = msg
    fatal = failure = err = error = critical = exception = msg


def without_sign_in_tracebacks(record: logging.LogRecord) -> bool:
    """The MCP SDK's OAuth client logs its failures with their exception, whose text may quote a token
    endpoint's answer or a refresh response (pydantic's errors quote their input): dropped. Its plain warnings
    ("Token refresh failed: 400") stay; the gateway logs what a failed sign-in means itself."""
    return not (record.exc_info and record.name.startswith("mcp.client.auth"))


def _renderer(log_format: str) -> Processor:
    """JSON lines, or the console's; values bounded either way."""
    if log_format == "json":
        return _chain(structlog.processors.format_exc_info, _bounded, last=structlog.processors.JSONRenderer())
    return _chain(
        _bounded,
        last=structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty(),
                                           exception_formatter=structlog.dev.plain_traceback),
    )


def _quiet_libraries(level: int) -> None:
    """What other libraries log that repeats ours or floods the log."""
    # uvicorn's own access log repeats our request line without the tool figures.
    logging.getLogger("uvicorn.access").disabled = True
    for noisy in ("httpx", "httpcore", "httpx2", "httpcore2"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, level))
    # At debug it logs every SSE chunk it sends: the whole of every answer.
    logging.getLogger("sse_starlette").setLevel(max(logging.INFO, level))
    # The config watcher's library says "N changes detected" (info) and "all changes filtered out" (debug) for
    # every write in the watched folders: with the log file in one of them, each line would log another.
    logging.getLogger("watchfiles").setLevel(logging.WARNING)


# A processor that hands the event on to the next, as every one before the renderer does.
_Step = Callable[[WrappedLogger, str, EventDict], EventDict]


def _chain(*processors: _Step, last: Processor) -> Processor:
    """The processors, then the renderer `last`, as one."""

    def run(logger: WrappedLogger, method: str, event: EventDict) -> ProcessorReturnValue:
        for processor in processors:
            event = processor(logger, method, event)
        return last(logger, method, event)

    return run


def _bounded(_logger: WrappedLogger, _method: str, event: EventDict) -> EventDict:
    for key, value in event.items():
        if isinstance(value, str) and len(value) > MAX_FIELD_CHARS:
            event[key] = f"{value[:MAX_FIELD_CHARS]}... ({len(value) - MAX_FIELD_CHARS} more characters)"
    return event


class _Redactor:
    """The exact secrets to take out of every line: those known at start, and keys a reloaded file adds."""

    def __init__(self) -> None:
        self._known: set[str] = set()
        self.exact: re.Pattern[str] | None = None

    def add(self, secrets: Iterable[str]) -> None:
        added = {s for s in secrets if s} - self._known
        if added:
            self._known |= added
            longest_first = sorted(self._known, key=len, reverse=True)
            self.exact = re.compile("|".join(re.escape(s) for s in longest_first))


_redactor = _Redactor()


def add_secrets(secrets: Iterable[str]) -> None:
    """Secrets learnt after start (a keys file re-read): redacted from every later line too."""
    _redactor.add(secrets)


def _redacting(renderer: Processor, secrets: Iterable[str]) -> Processor:
    _redactor.add(secrets)

    def render(logger: WrappedLogger, method: str, event: EventDict) -> ProcessorReturnValue:
        line = renderer(logger, method, event)
        if isinstance(line, str):
            line = _CREDENTIAL.sub(lambda m: m.group(1) + REDACTED, line)
            if _redactor.exact is not None:
                line = _redactor.exact.sub(REDACTED, line)
        return line

    return render
