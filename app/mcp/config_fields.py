"""The fields of mcp.json at each level: toolbridge's own, and those other products write in the same format
(Claude Desktop and Code, Cursor, LM Studio, VS Code, Cline, Roo Code, Windsurf), so that their files start here.
Any other field stops the file, named with where it is and the nearest known one: a field toolbridge drops unread
could be `per_key` written beside `oauth` (a server shared by every key) or a misspelt `confirm` (no approvals).
Pure: the models' own names come from app/mcp/config.py; docs/configuration.md lists the other products' fields."""

from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from app.openai.wire import JSONObject, JSONValue
from app.settings.fields import shown, unknown_field

# Other products' names for what toolbridge does too: the entry is read as if it used ours.
ADOPTED = {
    "serverUrl": "url",  # Windsurf
    "transportType": "type",  # Cline
    "auth": "oauth",  # Cursor's pre-registered OAuth client, with its own names inside
}
CURSOR_AUTH = {"CLIENT_ID": "client_id", "CLIENT_SECRET": "client_secret", "scopes": "scopes"}
ENV_FILE = "envFile"  # VS Code and Cursor: a stdio server's variables from a file (app/mcp/config_values.py)

# Accepted and not used: what each does in its product is in docs/configuration.md, with why it is left alone here.
# Tuples: a message that lists a level's fields lists them in this order.
IGNORED_TOP = (
    "inputs",  # VS Code's prompts for ${input:...}, which toolbridge refuses where they are used
    "$schema",
    "globalShortcut", "preferences",  # Claude Desktop's own settings, in claude_desktop_config.json
)
IGNORED_SERVER = (
    "autoApprove", "alwaysAllow",  # Cline / Roo Code: tools its one user lets run unasked; approvals are "confirm"
    "watchPaths",  # Roo Code: restart the server when these files change
    "dev",  # VS Code: watch and debug a server under development
    "gallery", "version",  # VS Code: where an installed server came from
    "headersHelper",  # Claude Code: a command whose output is the headers; toolbridge runs no such command
    "icon", "description",
)
IGNORED_OAUTH = ("callbackPort",)  # Claude Code's local port; the gateway's callback is its own URL
# Other products' fields that toolbridge cannot honour and must not drop: the way to say it here.
REFUSED = {"authServerMetadataUrl": 'Claude Code\'s; toolbridge names the authorization server with "issuer"'}


def spellings(model: type[BaseModel], *, alias_first: bool = True) -> list[str]:
    """A model's fields as mcp.json may write them, the spelling the docs use first."""
    names: list[str] = []
    for name, info in model.model_fields.items():
        both = [info.alias, name] if alias_first else [name, info.alias]
        names += [spelling for spelling in both if spelling and spelling not in names]
    return names


def unknown_fields(raw: Mapping[str, JSONValue], own: Mapping[str, Sequence[str]]) -> list[str]:
    """Every unknown field of a whole file, each as `where: unknown field ...` (the top level without `where`).
    `own` holds toolbridge's own fields at the levels "top", "server" and "oauth"."""
    top = [*own["top"], *IGNORED_TOP]
    server = [*own["server"], *ADOPTED, ENV_FILE, *IGNORED_SERVER]
    oauth = [*own["oauth"], *IGNORED_OAUTH]
    found = [_said("", name, top, {'a server\'s "{}"': server}) for name in raw if name not in top]
    for key in own["top"]:
        servers = raw.get(key)
        if not isinstance(servers, dict):
            continue
        for name, entry in servers.items():
            if isinstance(entry, dict):
                found += _in_server(f"{key}.{name}", entry, server, oauth)
    return found


def _in_server(where: str, entry: Mapping[str, JSONValue], server: Sequence[str], oauth: Sequence[str]) -> list[str]:
    beside_oauth = '"{}" beside "oauth"'
    found = [_said(where, name, server, {'"oauth.{}"': oauth}) for name in entry if name not in server]
    if isinstance(its_oauth := entry.get("oauth"), dict):
        found += [_said(f"{where}.oauth", name, oauth, {beside_oauth: server})
                  for name in its_oauth if name not in oauth]
    if isinstance(its_auth := entry.get("auth"), dict):
        found += [_said(f"{where}.auth", name, list(CURSOR_AUTH), {})
                  for name in its_auth if name not in CURSOR_AUTH]
    return found


def _said(where: str, name: str, here: Sequence[str], elsewhere: Mapping[str, Sequence[str]]) -> str:
    prefix = f"{where}: " if where else ""
    if name in REFUSED:
        return f"{prefix}unknown field {shown(name)} ({REFUSED[name]})"
    return prefix + unknown_field(name, here, elsewhere)


def adopted(entry: Mapping[str, JSONValue]) -> JSONObject:
    """A server entry in toolbridge's own words: other products' names for our fields renamed, the fields we do not
    use left out (before `${VAR}`s are expanded: VS Code's `dev` may name `${workspaceFolder}`).

    Raises:
        ValueError: a field is given twice, in our name and another product's.
    """
    ours = {name: value for name, value in entry.items() if name not in IGNORED_SERVER}
    for theirs, name in ADOPTED.items():
        if theirs not in ours:
            continue
        if name in ours:
            raise ValueError(f"'{theirs}' and '{name}' say the same thing: keep one")
        value = ours.pop(theirs)
        ours[name] = {CURSOR_AUTH.get(k, k): v for k, v in value.items()} if theirs == "auth" and isinstance(
            value, dict) else value
    if isinstance(its_oauth := ours.get("oauth"), dict):
        ours["oauth"] = {name: value for name, value in its_oauth.items() if name not in IGNORED_OAUTH}
    return ours


def ignored(entry: Mapping[str, JSONValue]) -> list[str]:
    """The fields of a server entry that toolbridge accepts and does not use, for the log."""
    unused = [name for name in entry if name in IGNORED_SERVER]
    oauth = entry.get("oauth")
    return unused + ([f"oauth.{name}" for name in oauth if name in IGNORED_OAUTH] if isinstance(oauth, dict) else [])
