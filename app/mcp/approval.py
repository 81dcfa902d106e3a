"""Which tool calls wait for the person's yes before they run (issue 30): a server's `confirm` in mcp.json
over TOOLBRIDGE_CONFIRM. Pure: decided once per tool when the catalogue is built (convert.py), and read by
the loop through the tool's route (`ToolRoute.asks_first`).

A server's annotations are its own hints, not a guarantee: the global default trusts them (`destructive`,
`writes`), and an operator who does not trust a server says `"confirm": true` for it.
"""

from collections.abc import Sequence
from fnmatch import fnmatchcase

from mcp.types import ToolAnnotations

from app.settings.vocabularies import ConfirmPolicy

# mcp.json's `confirm` for one server (config.py): every tool, no tool, these names and globs, or unset.
ServerConfirm = bool | Sequence[str] | None


def asks_first(tool: str, annotations: ToolAnnotations | None, server: ServerConfirm, default: ConfirmPolicy) -> bool:
    """Whether a call of `tool` (the server's own name for it) waits for the person's yes. `true` and `false`
    decide every tool of the server; a list asks for the tools it matches (fnmatch globs, case-sensitive as
    tool names are) and leaves the others to `default`."""
    if isinstance(server, bool):
        return server
    if server is not None and any(fnmatchcase(tool, pattern) for pattern in server):
        return True
    return _by_default(annotations, default)


def _by_default(annotations: ToolAnnotations | None, default: ConfirmPolicy) -> bool:
    read_only = annotations is not None and annotations.read_only_hint is True
    if default == "all":
        return True
    if default == "writes":
        return not read_only
    if default == "destructive":
        # Only a server that says so: MCP's own default for a tool without the hint is "may destroy", which
        # would make this `writes`, and nearly every tool today is unannotated.
        return annotations is not None and annotations.destructive_hint is True and not read_only
    return False
