"""The repo's own mcp.json, with the real mcp-server-time from PyPI, answering a time question."""

import json
import re
from pathlib import Path

import openai

from app.main import create_app
from app.settings import Settings
from tests.conftest import servers_ready, wait_for_health
from tests.support.fake_upstream import Call, FakeUpstream, Turn, last_tool_results
from tests.support.servers import ServerThread

REPO_MCP_JSON = Path(__file__).parent.parent / "mcp.json"


def test_repo_mcp_json_answers_the_time_in_utc(upstream: FakeUpstream) -> None:
    settings = Settings(_env_file=None, mcp_config=REPO_MCP_JSON, upstream_url=f"{upstream.url}/v1")  # type: ignore[call-arg]

    def answer(body: dict) -> Turn:
        result = json.loads(next(iter(last_tool_results(body).values())))["data"]
        return Turn(content=f"It is {result['datetime']} in {result['timezone']}.")

    upstream.script(Turn(calls=[Call("get_current_time", {"timezone": "UTC"})]), answer)
    with ServerThread(create_app(settings)) as thread:
        wait_for_health(thread.url, servers_ready("time"))
        client = openai.OpenAI(base_url=f"{thread.url}/v1", api_key="none", max_retries=0)
        stream = client.chat.completions.create(
            model="qwen3-8b", messages=[{"role": "user", "content": "What time is it in UTC?"}], stream=True
        )
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream)
    assert re.fullmatch(r"It is \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00 in UTC\.", text), text
