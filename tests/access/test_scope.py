"""What one key may use: the one decision, as a table (servers, tools, whose calls, whose shared sign-in)."""

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


@pytest.mark.parametrize(("scope", "server", "may"), [
    (EVERYTHING, "github", True),  # the operator's keys (and everyone, with no keys)
    (ALICE, "files", False),  # may use it, not change whose account every key acts as
    (KeyScope(frozenset({"files"}), sign_ins=frozenset({"files"})), "files", True),
    (KeyScope(frozenset({"files"}), sign_ins=frozenset({"github"})), "github", False),  # not without using it
    (KeyScope(None, sign_ins=frozenset({"files"})), "github", False),
    (KeyScope(frozenset({"files", "github"}), sign_ins=None), "github", True),  # "sign_in": "*"
])
def test_who_may_sign_a_shared_server_in_or_out(scope: KeyScope, server: str, may: bool) -> None:
    assert scope.may_sign_in(server) is may
