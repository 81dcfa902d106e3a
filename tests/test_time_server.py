"""The repo's own mcp.json, with the real mcp-server-time from PyPI, answering a time question."""

import json
import re
from pathlib import Path

from tests.conftest import running_gateway
from tests.support.fake_upstream import Call, FakeUpstream, Turn, last_tool_results

REPO_MCP_JSON = Path(__file__).parent.parent / "mcp.json"


def test_repo_mcp_json_answers_the_time_in_utc(upstream: FakeUpstream, tmp_path: Path) -> None:
    def answer(body: dict) -> Turn:
        result = json.loads(next(iter(last_tool_results(body).values())))["data"]
        return Turn(content=f"It is {result['datetime']} in {result['timezone']}.")

    upstream.script(Turn(calls=[Call("get_current_time", {"timezone": "UTC"})]), answer)
    # The repository's own mcp.json, with the default tool names (no prefix where nothing clashes).
    with running_gateway(tmp_path, ready=("time",), mcp_config=REPO_MCP_JSON, tool_prefix="on-conflict",
                         upstream_url=f"{upstream.url}/v1") as gateway:
        client = gateway.client()
        stream = client.chat.completions.create(
            model="qwen3-8b", messages=[{"role": "user", "content": "What time is it in UTC?"}], stream=True
        )
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream)
    assert re.fullmatch(r"It is \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00 in UTC\.", text), text
