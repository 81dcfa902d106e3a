"""A server's stderr stays with the operator (issue 9's audit): what a crashing server prints (another user's
arguments, the operator's secrets) never reaches another user's chat or an anonymous /health."""

import json
from pathlib import Path

import httpx
import openai

from tests.conftest import stdio_entry, wait_for_health
from tests.security.conftest import gateway_at
from tests.support.fake_upstream import Call, FakeUpstream, Turn

ASK = [{"role": "user", "content": "hi"}]




def test_a_servers_stderr_never_reaches_another_users_chat(tmp_path: Path, upstream: FakeUpstream) -> None:
    servers = {"leaky": stdio_entry("leaky.py", str(tmp_path / "down"))}
    with gateway_at(tmp_path, f"{upstream.url}/v1", servers, api_keys="key-a,key-b") as gateway:
        wait_for_health(gateway.url, lambda b: b["servers"]["leaky"]["state"] == "ready", key="key-a")
        upstream.script(Turn(calls=[Call("leaky__note", {"text": "USER-A-PRIVATE"})]), Turn(content="saved"))
        user_a = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="key-a", max_retries=0)
        user_a.chat.completions.create(model="m", messages=ASK)
        wait_for_health(gateway.url, lambda b: b["servers"]["leaky"]["state"] == "failed", key="key-a")

        upstream.script(Turn(calls=[Call("leaky__ping", {})]), Turn(content="it is down"))
        user_b = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="key-b", max_retries=0)
        shown = "".join(
            (chunk.choices[0].delta.content or "") + str(getattr(chunk.choices[0].delta, "reasoning_content", ""))
            for chunk in user_b.chat.completions.create(model="m", messages=ASK, stream=True) if chunk.choices
        )
        tool_message = json.dumps(upstream.chat_requests()[1]["messages"][-1])
        assert "server_unavailable" in tool_message
        for secret in ("USER-A-PRIVATE", "OPERATOR-SECRET", "stderr"):
            assert secret not in tool_message
            assert secret not in shown

        anonymous = httpx.get(f"{gateway.url}/health")
        assert anonymous.json() == {"status": "degraded"}
        operator = httpx.get(f"{gateway.url}/health", headers={"Authorization": "Bearer key-a"}).json()
        assert "OPERATOR-SECRET-CANARY" in json.dumps(operator["servers"]["leaky"])
