"""Signing the gateway in to a protected MCP server, through a running gateway, over real HTTP: the real
authorization server and protected MCP server of tests/support/oauth_servers.py, a person's browser played by
httpx (the consent form answered as a browser submits it; tests/test_sign_in_browser.py does it in Chromium).

The server waits as "needs_sign_in" (configured, or recognised by its 401), the status page's link signs in, the
tools appear with no restart and are called through the chat API; refresh on expiry; a revoked sign-in leads
back to "needs_sign_in"; sign-out; a restart keeps the sign-in; a used or forged `state`, a wrong issuer and a
refusal at the consent page change nothing; and no token is ever in the log or an answer."""

import json
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import pytest

from tests.conftest import Gateway, running_gateway, wait_for_health
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn
from tests.support.oauth_servers import ConsentForm, OAuthPair
from tests.test_cli import TOOLBRIDGE, clean_env

DEADLINE = 30.0


class Person:
    """A person at a browser (its cookies kept, as a browser keeps them) with the gateway's key, sent as the
    status page's Basic credentials."""

    def __init__(self, gateway: Gateway, key: str | None = None) -> None:
        self.gateway, self.key = gateway, key
        self.browser = httpx.Client(timeout=30)

    def start(self, server: str) -> httpx.Response:
        """The status page's "Sign in" link: the gateway's answer (a redirect to the authorization server)."""
        auth = ("", self.key) if self.key else None
        return self.browser.get(f"{self.gateway.url}/ui/servers/{server}/sign-in", auth=auth)

    def consent(self, authorization_url: str, button: str = "Allow", user: str | None = None) -> str:
        """At the authorization server: the consent page answered; where it sends the browser back."""
        page = self.browser.get(authorization_url, follow_redirects=True)
        assert page.status_code == 200, page.text
        form = ConsentForm()
        form.feed(page.text)
        name, value = form.buttons[button]
        fields = form.fields | {name: value} | ({"user": user} if user else {})
        back = self.browser.post(urljoin(str(page.url), form.action), data=fields)
        assert back.status_code == 302, back.text
        return back.headers["location"]

    def back(self, location: str) -> httpx.Response:
        """The browser following the authorization server's redirect back to the gateway."""
        return self.browser.get(location)

    def sign_in(self, server: str, button: str = "Allow", user: str | None = None) -> httpx.Response:
        """The whole way: the gateway's link, consent, and back to the gateway's callback (its answer)."""
        started = self.start(server)
        assert started.status_code == 303, started.text
        return self.back(self.consent(started.headers["location"], button, user))


def state_of(gateway: Gateway, server: str, key: str | None = None) -> dict[str, Any]:
    return wait_for_health(gateway.url, lambda body: server in body.get("servers", {}), key=key)["servers"][server]


def wait_state(gateway: Gateway, server: str, state: str, key: str | None = None) -> dict[str, Any]:
    body = wait_for_health(gateway.url, lambda b: b.get("servers", {}).get(server, {}).get("state") == state,
                           timeout=DEADLINE, key=key)
    return body["servers"][server]


@contextmanager
def protected_gateway(tmp: Path, upstream: FakeUpstream, entry: dict[str, Any] | None = None, pair_options:
                      dict[str, Any] | None = None, **settings: Any) -> Iterator[tuple[OAuthPair, Gateway]]:
    with OAuthPair.start(**(pair_options or {})) as pair:
        server = {"url": pair.mcp_server.mcp_url} | (entry or {})
        with running_gateway(tmp, {"protected": server}, upstream_url=f"{upstream.url}/v1", tool_trace="off",
                             **settings) as gateway:
            yield pair, gateway


def whoami_through_the_chat(gateway: Gateway, upstream: FakeUpstream) -> str:
    upstream.script(Turn(calls=[Call("protected__whoami", {})]), Turn(content="done"))
    gateway.client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "who am I?"}])
    result = json.loads(upstream.chat_requests()[1]["messages"][-1]["content"])
    assert result["status"] == "success", result
    return str(result["data"]["result"])


@pytest.mark.parametrize("entry", [{"oauth": True}, {}], ids=["oauth in mcp.json", "recognised by its 401"])
def test_a_server_waits_for_a_sign_in_then_its_tools_appear_and_are_called(
    tmp_path: Path, upstream: FakeUpstream, entry: dict[str, Any]
) -> None:
    with protected_gateway(tmp_path, upstream, entry) as (pair, gateway):
        waiting = wait_state(gateway, "protected", "needs_sign_in")
        assert waiting["tools"] == 0 and waiting["signed_in"] is False and "error" not in waiting
        person = Person(gateway)
        started = person.start("protected")
        assert started.status_code == 303 and started.headers["cache-control"] == "no-store"
        sent = parse_qs(urlsplit(started.headers["location"]).query)
        assert started.headers["location"].startswith(f"{pair.authorization_server.issuer}/authorize?")
        assert sent["redirect_uri"] == [f"{gateway.url}/oauth/callback"]
        assert sent["resource"] == [pair.mcp_server.mcp_url] and sent["code_challenge_method"] == ["S256"]
        assert started.cookies["toolbridge_sign_in"] and "Max-Age=600" in started.headers["set-cookie"]
        assert "HttpOnly" in started.headers["set-cookie"] and "Path=/oauth/callback" in started.headers["set-cookie"]
        back = person.back(person.consent(started.headers["location"]))
        assert back.status_code == 303 and back.headers["location"] == "/?signed_in=protected"
        ready = wait_state(gateway, "protected", "ready")
        assert ready["tools"] == 2 and ready["signed_in"] is True
        assert whoami_through_the_chat(gateway, upstream) == "alice"
        assert pair.authorization_server.provider.authorizations == ["alice"]
        # Asked for JSON: GitHub's token endpoint answers form-encoded otherwise.
        assert pair.authorization_server.provider.code_exchange_accepts == ["application/json"]


def test_a_used_or_forged_state_and_a_refusal_change_nothing(tmp_path: Path, upstream: FakeUpstream) -> None:
    with protected_gateway(tmp_path, upstream, {"oauth": True}) as (pair, gateway):
        wait_state(gateway, "protected", "needs_sign_in")
        person = Person(gateway)
        refused = person.sign_in("protected", button="Deny")
        assert refused.status_code == 400 and "was not given" in refused.text
        forged = httpx.get(f"{gateway.url}/oauth/callback", params={"state": "made-up", "code": "x"}, timeout=30)
        assert forged.status_code == 400 and "start again from the status page" in forged.text
        started = person.start("protected")
        came_back = person.consent(started.headers["location"])
        assert person.back(came_back).status_code == 303
        again = person.back(came_back)
        assert again.status_code == 400 and "finished already" in again.text
        assert len(pair.authorization_server.provider.access_tokens) == 1  # the code was exchanged once
        assert wait_state(gateway, "protected", "ready")["tools"] == 2


def test_a_sign_in_link_sent_to_someone_else_signs_nobody_in(tmp_path: Path, upstream: FakeUpstream) -> None:
    # Mallory starts a sign-in and sends its link to Alice: had Alice's consent been taken, the gateway (or with
    # per_key, Mallory's key) would act as Alice. The way back must come to the browser that started.
    with protected_gateway(tmp_path, upstream, {"oauth": True}) as (pair, gateway):
        wait_state(gateway, "protected", "needs_sign_in")
        mallory, alice = Person(gateway), Person(gateway)
        link = mallory.start("protected").headers["location"]
        refused = alice.back(alice.consent(link, user="alice"))
        assert refused.status_code == 400 and "started in another browser" in refused.text
        assert not pair.authorization_server.provider.access_tokens  # the code was never exchanged
        assert state_of(gateway, "protected")["state"] == "needs_sign_in"


def test_a_wrong_issuer_in_the_answer_is_refused(tmp_path: Path, upstream: FakeUpstream) -> None:
    with protected_gateway(tmp_path, upstream, {"oauth": True}, {"wrong_issuer": "redirect"}) as (pair, gateway):
        wait_state(gateway, "protected", "needs_sign_in")
        answer = Person(gateway).sign_in("protected")
        assert answer.status_code == 400 and "another authorization server" in answer.text
        assert not pair.authorization_server.provider.access_tokens
        assert state_of(gateway, "protected")["state"] == "needs_sign_in"


def test_no_token_reaches_the_log_or_any_answer(
    tmp_path: Path, upstream: FakeUpstream, capsys: pytest.CaptureFixture[str]
) -> None:
    with protected_gateway(tmp_path, upstream, {"oauth": True}) as (pair, gateway):
        wait_state(gateway, "protected", "needs_sign_in")
        Person(gateway).sign_in("protected")
        wait_state(gateway, "protected", "ready")
        whoami_through_the_chat(gateway, upstream)
        answers = [httpx.get(f"{gateway.url}{path}", timeout=30).text
                   for path in ("/health", "/ui/health", "/ui/tools", "/ui/calls", "/ui/requests", "/metrics")]
        provider = pair.authorization_server.provider
        secrets = [*provider.access_tokens, *provider.refresh_tokens,
                   *(client.client_secret or "" for client in provider.clients.values())]
        assert secrets and all(secrets)
        seen = capsys.readouterr()
        written = "\n".join([*answers, seen.out, seen.err, *(json.dumps(r) for r in upstream.chat_requests())])
        assert [s for s in secrets if s in written] == []
        assert re.search(r"mcp_signed_in", seen.out + seen.err)
        db = (tmp_path / "state.tokens.db").read_bytes()
        assert [s for s in secrets if s.encode() in db] == []


def test_toolbridge_tools_uses_the_gateways_sign_in_and_says_who_waits(tmp_path: Path, upstream: FakeUpstream) -> None:
    with protected_gateway(tmp_path, upstream, {"oauth": True}) as (pair, gateway):
        state_url = f"sqlite:///{tmp_path / 'state.db'}"
        command = [TOOLBRIDGE, "tools", "--mcp-config", str(tmp_path / "mcp.json"), "--state-url", state_url]
        waiting = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, env=clean_env())
        assert json.loads(waiting.stdout) == [] and waiting.returncode == 0
        assert "MCP server 'protected' needs a sign-in" in waiting.stderr
        wait_state(gateway, "protected", "needs_sign_in")
        Person(gateway).sign_in("protected")
        wait_state(gateway, "protected", "ready")
        listed = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, env=clean_env())
        names = {tool["function"]["name"] for tool in json.loads(listed.stdout)}
        assert names == {"whoami", "echo"} and listed.returncode == 0, listed.stderr
        assert pair.authorization_server.provider.authorizations == ["alice"]
