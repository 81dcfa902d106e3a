"""**What one key may use**: the one place that decides whether a caller's key may use an MCP server (see it, list
it, call its tools, restart it, read its prompts and resources) or call one tool. Pure, tested by tables; the
routes and the chat path ask it, through the pool as the key sees it (app/mcp/key_view.py).

A key of TOOLBRIDGE_API_KEYS, or any caller when the gateway has no keys, may use everything. A key of the keys
file (app/access/keys_file.py) may use the servers it names and the toolsets' members (server names, or tool
names as offered: such a tool may be called, its server is not thereby the key's).

A server without `per_key` has one sign-in, which every key's calls act as: starting or ending it is the
operator's (TOOLBRIDGE_API_KEYS, or everyone when there are no keys), or a keys-file key's whose "sign_in" names
the server. (On a `per_key` server each key signs itself in: app/mcp/key_view.py.)
"""

from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass(frozen=True)
class KeyScope:
    """What one key may use. `names` None: everything. `caller`: which key it is, a digest (never the key), by
    which the recent calls and requests are kept apart; "" for the keys that see everything. `digest`: a key of
    the keys file's whole SHA-256, by which its scope is looked up again while its requests run (key_ring.py);
    "" for a key that cannot be taken out while the gateway runs. `sign_ins`: the servers whose shared sign-in
    it may start and end; None: every one it may use (none unless given)."""

    names: frozenset[str] | None = None
    caller: str = ""
    digest: str = field(default="", repr=False, compare=False)
    sign_ins: frozenset[str] | None = frozenset()

    @property
    def everything(self) -> bool:
        return self.names is None

    def may_use_server(self, server: str) -> bool:
        """May this key see, list, call, restart, read this server?"""
        return self.names is None or server in self.names

    def may_call(self, tool: str, server: str) -> bool:
        """May this key be offered and call the tool `tool` (its name as offered) of `server`?"""
        return self.names is None or server in self.names or tool in self.names

    def may_sign_in(self, server: str) -> bool:
        """May this key sign `server`'s shared sign-in in or out (the identity every key's calls act as)?"""
        return self.may_use_server(server) and (self.sign_ins is None or server in self.sign_ins)

    def sees_caller(self, caller: str | None) -> bool:
        """May this key see what the key `caller` did (a recent call, a request's offer)? Its own only, unless
        it sees everything (the operator's keys)."""
        return self.names is None or caller == self.caller


EVERYTHING = KeyScope(sign_ins=None)
# A caller the guard refused, served only where no key is needed (/health's status, public metrics, images).
NOBODY = KeyScope(frozenset(), caller="nobody")

# The key of the request being served: set by the guard (app/api/guard.py), read where a request's work is
# recorded for people to look at (app/ops/recent_calls.py, recent_requests.py), deep below the route.
CURRENT_SCOPE: ContextVar[KeyScope] = ContextVar("toolbridge_key_scope", default=EVERYTHING)
