"""A ten-megabyte user message ranked against sixty tools (issue 27's N8): a regular expression per tool over
all of the text held the event loop 13 s on fe3fc42. Now ranked at once, the tools it names kept."""

from collections.abc import Iterator

import pytest

from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.security.conftest import MB, answer_text, send
from tests.support.fake_upstream import FakeUpstream, Turn


@pytest.fixture(scope="module")
def crowded(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """60 MCP tools (five servers of twelve) with a budget of 4: every request is ranked."""
    servers = {f"s{number}": stdio_entry("basic.py") for number in range(5)}
    with running_gateway(tmp_path_factory.mktemp("crowded"), servers, ready=tuple(servers),
                         upstream_url=f"{upstream.url}/v1", tool_budget=4) as gateway:
        yield gateway


def test_a_ten_megabyte_message_with_sixty_tools_is_ranked_at_once(crowded: Gateway, upstream: FakeUpstream) -> None:
    """13 s on fe3fc42 (a regular expression per tool over all of the text)."""
    upstream.script(Turn(content="read it"))
    text = "Please use get_weather on this report. " + "lorem ipsum dolor " * (10 * MB // 18)
    assert answer_text(send(crowded, [{"role": "user", "content": text}])) == "read it"
    offered = [tool["function"]["name"] for tool in upstream.chat_requests()[-1]["tools"]]
    assert len(offered) == 5 and all(f"s{n}__get_weather" in offered for n in range(5))  # named: pinned
