"""Thinking and printed tool calls are split out of content however the stream cuts the text."""

import pytest

from app.openai.markup import ContentSplitter, TextCall

TOOLS = {"time__get_current_time"}
CASES = [
    ("plain answer", "plain answer", "", []),
    ("<think>hmm, UTC</think>It is noon.", "It is noon.", "hmm, UTC", []),
    ("Sure. <tool_call>{\"name\": \"time__get_current_time\", \"arguments\": {\"timezone\": \"UTC\"}}</tool_call>",
     "Sure. ", "", [TextCall("time__get_current_time", '{"timezone": "UTC"}')]),
    ('[TOOL_REQUEST]{"name": "time__get_current_time", "arguments": {}}[END_TOOL_REQUEST]', "", "",
     [TextCall("time__get_current_time", "{}")]),
    ('{"name": "time__get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}', "", "",
     [TextCall("time__get_current_time", '{"timezone": "Asia/Tokyo"}')]),
    ('{"name": "not_offered", "arguments": {}}', '{"name": "not_offered", "arguments": {}}', "", []),
    ('{"answer": 42}', '{"answer": 42}', "", []),
    ("<think>a</think><think>b</think>c", "c", "ab", []),
    ("1 < 2 and [TOOL is fine", "1 < 2 and [TOOL is fine", "", []),
    ("<tool_call>not json</tool_call>done", "done", "", []),
    ("<think>unfinished", "", "unfinished", []),
]


def run(pieces: list[str]) -> tuple[str, str, list[TextCall]]:
    splitter = ContentSplitter(TOOLS)
    content = reasoning = ""
    for piece in pieces:
        out = splitter.feed(piece)
        content, reasoning = content + out.content, reasoning + out.reasoning
    out = splitter.finish()
    return content + out.content, reasoning + out.reasoning, splitter.calls


@pytest.mark.parametrize(("text", "content", "reasoning", "calls"), CASES)
def test_whole_text(text: str, content: str, reasoning: str, calls: list) -> None:
    assert run([text]) == (content, reasoning, calls)


@pytest.mark.parametrize(("text", "content", "reasoning", "calls"), CASES)
def test_every_cut_into_two_and_char_by_char(text: str, content: str, reasoning: str, calls: list) -> None:
    for cut in range(1, len(text)):
        assert run([text[:cut], text[cut:]]) == (content, reasoning, calls), cut
    assert run(list(text)) == (content, reasoning, calls)


def test_plain_content_is_not_held_back_longer_than_a_possible_tag() -> None:
    splitter = ContentSplitter(TOOLS)
    assert splitter.feed("Hello wor").content == "Hello wor"
    assert splitter.feed("ld <thi").content == "ld "
    assert splitter.feed("nking aloud").content == "<thinking aloud"
