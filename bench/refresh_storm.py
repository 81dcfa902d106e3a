"""The refresh storm (issue 43, "OAuth on the second day"): two toolbridge processes sharing one sign-in through a
real redis-server, tokens that expire every 2 s, chats on both for a minute. Prints what the authorization server
saw: the refreshes made, the reuses (a refresh token presented again after it was spent; this server revokes the
whole grant for one, as Outline did to LibreChat #14583, so one reuse signs everyone out), the chats whose tool call
failed, and whether the one sign-in still stands.

The authorization server and the protected MCP server are the suite's (tests/support/oauth_servers.py), in this
process; the model is a stand-in that calls `whoami` and answers with its result. `--source DIR` runs the gateways
from another checkout (the code before a change, for the figures beside it). Figures are printed, never checked;
the machine's load is printed with them. Every process started is stopped at the end.

    .venv/bin/python -m bench.refresh_storm                      # 60 s, 2 s tokens, 2 chats at a time a gateway
    .venv/bin/python -m bench.refresh_storm --seconds 20 --source /tmp/toolbridge-before
"""

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import httpx
import openai
from cryptography.fernet import Fernet

from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.support.oauth_servers import ConsentForm, OAuthPair
from tests.support.replica_services import RedisServer
from tests.support.servers import ServerThread, free_port

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT = 120.0


def whoami_model(body: dict[str, Any]) -> Turn:
    """Calls `whoami` and answers with what it said."""
    last = body["messages"][-1]
    return Turn(content=str(last["content"])) if last["role"] == "tool" else Turn(calls=[Call("whoami", {})])


@contextmanager
def gateway(source: Path, folder: Path, env: dict[str, str]) -> Iterator[str]:
    """A toolbridge process run from the checkout `source`; yields its base URL once it answers."""
    port = free_port()
    folder.mkdir()
    log = (folder / "gateway.log").open("w")
    process = subprocess.Popen([sys.executable, "-m", "app", "--port", str(port)], cwd=folder, stdout=log,
                               stderr=subprocess.STDOUT, env=env | {"PYTHONPATH": str(source)})
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(base, lambda body: "protected" in body.get("servers", {}), process)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            print(f"gateway {port} did not stop in 60 s: killed")
        log.close()


def wait_for(base: str, predicate: Any, process: subprocess.Popen[bytes] | None = None) -> dict[str, Any]:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            body: dict[str, Any] = httpx.get(f"{base}/health", timeout=5).json()
            if predicate(body):
                return body
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or (process is not None and process.poll() is not None):
            raise SystemExit(f"{base} never got there (its gateway.log says why)")
        time.sleep(0.1)


def state(base: str) -> dict[str, Any]:
    servers: dict[str, Any] = httpx.get(f"{base}/health", timeout=10).json()["servers"]
    return dict(servers["protected"])


def sign_in(base: str) -> None:
    """A person at a browser: the gateway's sign-in link, Allow at the consent page, back to the callback."""
    with httpx.Client(timeout=30) as browser:
        started = browser.get(f"{base}/ui/servers/protected/sign-in")
        page = browser.get(started.headers["location"], follow_redirects=True)
        form = ConsentForm()
        form.feed(page.text)
        name, value = form.buttons["Allow"]
        back = browser.post(urljoin(str(page.url), form.action), data=form.fields | {name: value})
        answer = browser.get(back.headers["location"])
        if answer.status_code != 303:
            raise SystemExit(f"the sign-in did not finish: {answer.status_code} {answer.text[:200]}")


def chat_until(base: str, until: float, tally: Counter[str], failures: list[str], label: str = "") -> None:
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=60)
    while time.monotonic() < until:
        try:
            reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "who am I?"}])
            result = json.loads(reply.choices[0].message.content or "{}")
            ok = result.get("status") == "success" and result["data"]["result"] == "alice"
        except (openai.OpenAIError, ValueError, KeyError) as exc:
            ok, result = False, {"error": type(exc).__name__}
        tally[f"{label} {'ok' if ok else 'failed'}"] += 1
        if not ok:
            failures.append(str(result)[:200])


def main() -> None:
    logging.disable(logging.INFO)  # the in-process servers' and clients' lines: the figures are printed, not logged
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--lifetime", type=int, default=2, help="the access tokens' lifetime, in seconds")
    parser.add_argument("--chatters", type=int, default=2, help="chats at a time on each gateway")
    parser.add_argument("--source", type=Path, default=ROOT, help="the checkout the gateways run from")
    args = parser.parse_args()
    upstream = FakeUpstream(default=whoami_model, record=False)
    redis = RedisServer()
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        redis.start()
        stack.callback(redis.stop)
        pair = stack.enter_context(OAuthPair.start(access_token_lifetime=args.lifetime, reuse_revokes_grant=True))
        model = stack.enter_context(ServerThread(upstream.app))
        config = Path(tmp) / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {"protected": {"url": pair.mcp_server.mcp_url, "oauth": True}}}))
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLBRIDGE_")} | {
            "TOOLBRIDGE_UPSTREAM_URL": f"{model.url}/v1", "TOOLBRIDGE_MCP_CONFIG": str(config),
            "TOOLBRIDGE_STATE_URL": redis.url, "TOOLBRIDGE_TOKEN_KEY": Fernet.generate_key().decode(),
            "TOOLBRIDGE_LOG_LEVEL": "info", "TOOLBRIDGE_TOOL_TRACE": "off"}
        a = stack.enter_context(gateway(args.source.resolve(), Path(tmp) / "a", env))
        b = stack.enter_context(gateway(args.source.resolve(), Path(tmp) / "b", env))
        sign_in(a)
        chat_until(b, time.monotonic() + 1, Counter(), [])  # a chat makes B look for the sign-in now
        for base in (a, b):
            wait_for(base, lambda body: body["servers"]["protected"]["state"] == "ready")
        storm(args, pair, a, b)


def storm(args: argparse.Namespace, pair: OAuthPair, a: str, b: str) -> None:
    provider = pair.authorization_server.provider
    before = provider.refreshes
    tally: Counter[str] = Counter()
    failures: list[str] = []
    load = os.getloadavg()[0]
    started = time.monotonic()
    until = started + args.seconds
    threads = [threading.Thread(target=chat_until, args=(base, until, tally, failures, label))
               for label, base in (("A", a), ("B", b)) for _ in range(args.chatters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    took = time.monotonic() - started
    chats = sum(tally.values())
    print(f"source {args.source.resolve()}; {took:.0f} s, {args.lifetime} s tokens, {args.chatters} chats at a time on "
          f"each of 2 gateways; load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    print(f"chats: {chats} ({', '.join(f'{k} {v}' for k, v in sorted(tally.items()))})")
    print(f"refreshes made: {provider.refreshes - before} (one per {took / max(1, provider.refreshes - before):.2f} s)")
    print(f"reuses seen by the authorization server: {provider.reuses}")
    print(f"failed chats: {len(failures)}" + (f"; the first: {failures[0]}" if failures else ""))
    print(f"sign-ins given: {len(provider.authorizations)}; the server now: "
          f"A {state(a)['state']}, B {state(b)['state']}")


if __name__ == "__main__":
    main()
