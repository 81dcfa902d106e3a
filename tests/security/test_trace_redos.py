"""Quadratic regular expressions in reading traces back (issue 27's N3): an assistant turn of unclosed `<details>`
openings, or an opening tag with one long word and no `=`, took 31-37 s at 80-232 KB on fe3fc42 with the event loop
held. Each is answered at once now, with memory on and off; figures in bench/hostile_inputs.py."""

import pytest

from tests.conftest import Gateway
from tests.security.conftest import MB, answer_text, send
from tests.support.fake_upstream import FakeUpstream, Turn

OPEN_TRACE = '<details type="tool_calls">'


@pytest.mark.parametrize("size", [232_000, MB], ids=["232KB", "1MB"])
def test_unclosed_trace_openings_are_no_work(plain: Gateway, upstream: FakeUpstream, size: int) -> None:
    """The audit's ReDoS: an assistant turn of nothing but details openings (31 s at 232 KB on fe3fc42)."""
    upstream.script(Turn(content="fine"))
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": OPEN_TRACE * (size // 29)},
               {"role": "user", "content": "and?"}]
    assert answer_text(send(plain, history)) == "fine"
    sent = upstream.chat_requests()[-1]["messages"]
    assert sent[1]["content"] == history[1]["content"]  # openings never closed are no trace: left as they are


def test_an_attribute_without_value_in_a_trace_is_no_work(plain: Gateway, upstream: FakeUpstream) -> None:
    """A details block whose opening tag holds one long word with no `=` (37 s at 80 KB on fe3fc42)."""
    upstream.script(Turn(content="fine"))
    block = f'{OPEN_TRACE[:-1]} id="c1" name="echo" {"w" * MB} result="&quot;r&quot;">\n</details>'
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": block},
               {"role": "user", "content": "and?"}]
    assert answer_text(send(plain, history)) == "fine"
