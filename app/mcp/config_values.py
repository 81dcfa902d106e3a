"""The values of an mcp.json server entry made whole: `${VAR}`, `${VAR:-default}` and `${env:VAR}` (Cursor's and VS
Code's spelling) expanded in every string, and the variables of an `envFile` read in. What cannot be made whole is
an `EntryError` naming the field; the values themselves, which hold secrets, are never in a message."""

import io
import re
from collections.abc import Mapping
from pathlib import Path
from typing import overload

from dotenv import dotenv_values

from app.openai.wire import JSONObject, JSONValue

_VARIABLE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_PROMPTED = re.compile(r"\$\{input:[^}]*\}")  # VS Code asks its user for these; a gateway has nobody to ask


class EntryError(Exception):
    """A server entry cannot be used; the message names the field, never a value."""


@overload
def expand(value: JSONObject, environ: Mapping[str, str], *, where: str = "") -> JSONObject: ...
@overload
def expand(value: JSONValue, environ: Mapping[str, str], *, where: str = "") -> JSONValue: ...
def expand(value: JSONValue, environ: Mapping[str, str], *, where: str = "") -> JSONValue:
    """Expands the variables in every string of `value`, naming the field when a variable is unset."""
    if isinstance(value, str):
        def substitute(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in environ and environ[name] != "":
                return environ[name]
            if default is not None:
                return default
            raise EntryError(f"field '{where}': environment variable {name} is not set")

        if _PROMPTED.search(value):
            raise EntryError(f"field '{where}': VS Code's ${{input:...}} prompts are not supported; use ${{VAR}} "
                             "and set VAR in the gateway's environment")
        return _VARIABLE.sub(substitute, value)
    if isinstance(value, list):
        return [expand(item, environ, where=f"{where}.{i}" if where else str(i)) for i, item in enumerate(value)]
    if isinstance(value, dict):
        return {k: expand(v, environ, where=f"{where}.{k}" if where else k) for k, v in value.items()}
    return value


def with_env_file(entry: JSONObject, base_dir: Path) -> JSONObject:
    """`envFile` (VS Code, Cursor): a stdio server's variables read from a dotenv file (relative to the mcp.json
    that names it), under its own `env`, which wins. Read at each load, so a reload of mcp.json re-reads it."""
    if "envFile" not in entry:
        return entry
    ours = dict(entry)
    named = ours.pop("envFile")
    if "command" not in ours:
        raise EntryError("field 'envFile' is for stdio servers ('command')")
    if not isinstance(named, str) or not named:
        raise EntryError("field 'envFile' must be the path of a file of NAME=value lines")
    path = base_dir / Path(named).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeError) as exc:
        raise EntryError(f"field 'envFile': {path} cannot be read ({type(exc).__name__})") from exc
    read = dotenv_values(stream=io.StringIO(text))
    loaded: JSONObject = {name: value for name, value in read.items() if value is not None}
    env = ours.get("env", {})
    ours["env"] = loaded | env if isinstance(env, dict) else env
    return ours
