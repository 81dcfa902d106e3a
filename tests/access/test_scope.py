"""What one key may use: the one decision, as a table."""

import pytest

from app.access import EVERYTHING, KeyScope

ALICE = KeyScope(frozenset({"files", "time", "web__fetch"}), caller="a1")


@pytest.mark.parametrize(("scope", "server", "tool", "server_ok", "tool_ok"), [
    (EVERYTHING, "files", "files__read", True, True),
    (EVERYTHING, "anything", "x", True, True),
    (ALICE, "files", "files__read", True, True),
    (ALICE, "time", "get_time", True, True),
    (ALICE, "shell", "shell__run", False, False),
    (ALICE, "web", "web__fetch", False, True),  # a tool named by a toolset: callable, its server not hers
    (ALICE, "web", "web__post", False, False),
    (ALICE, "Files", "files__read", False, False),  # names are exact
    (KeyScope(frozenset()), "files", "files__read", False, False),  # a key with no server: chat alone
])
def test_which_servers_and_tools_a_key_may_use(scope: KeyScope, server: str, tool: str, server_ok: bool,
                                               tool_ok: bool) -> None:
    assert scope.may_use_server(server) is server_ok
    assert scope.may_call(tool, server) is tool_ok


@pytest.mark.parametrize(("scope", "caller", "sees"), [
    (EVERYTHING, "a1", True),  # the operator's keys see everyone's calls
    (EVERYTHING, "", True),
    (ALICE, "a1", True),
    (ALICE, "b2", False),
    (ALICE, "", False),  # the operator's own calls
    (ALICE, None, False),
])
def test_a_limited_key_sees_its_own_calls_alone(scope: KeyScope, caller: str | None, sees: bool) -> None:
    assert scope.sees_caller(caller) is sees
