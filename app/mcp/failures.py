"""What went wrong, read from whatever the SDK raised: exception groups unwrapped into their leaves."""

from collections.abc import Iterator

from mcp import MCPError


def describe_failure(exc: BaseException, command: str | None = None) -> str:
    """A readable reason from whatever the SDK raised, exception groups unwrapped."""
    parts = []
    for leaf in leaves(exc):
        if isinstance(leaf, FileNotFoundError):
            parts.append(f"command not found: {leaf.filename or command}")
        elif isinstance(leaf, MCPError):
            parts.append(f"{leaf.message} (MCP error {leaf.code})")
        else:
            parts.append(f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__)
    return "; ".join(dict.fromkeys(parts)) or type(exc).__name__


def leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from leaves(inner)
    else:
        yield exc
