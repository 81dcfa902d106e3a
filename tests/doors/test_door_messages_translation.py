"""The Messages door's translation, without a server: a request's fields in the chat API's words or refused
naming the field, and the answer's parts as blocks that never interleave."""

from typing import Any

import pytest

from app.chat.answer.parts import CallsDone, Delta, Ended
from app.doors.messages.answer import messages_cut_off, server_sent
from app.doors.messages.blocks import MessageBlocks
from app.doors.messages.request import chat_body
from app.openai.accumulate import ToolCall, Usage
from app.openai.errors import InvalidRequest

HELLO = [{"role": "user", "content": "Hello."}]


def body(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 100, "messages": HELLO, **fields}


@pytest.mark.parametrize(("fields", "chat"), [
    ({"tool_choice": {"type": "any", "disable_parallel_tool_use": True}},
     {"tool_choice": "required", "parallel_tool_calls": False}),
    ({"tool_choice": {"type": "tool", "name": "clock"}},
     {"tool_choice": {"type": "function", "function": {"name": "clock"}}}),
    ({"tool_choice": {"type": "none"}}, {"tool_choice": "none"}),
    ({"thinking": {"type": "enabled", "budget_tokens": 4000}}, {"reasoning_effort": "low"}),
    ({"thinking": {"type": "enabled", "budget_tokens": 31999}}, {"reasoning_effort": "high"}),
    ({"thinking": {"type": "adaptive"}, "output_config": {"effort": "xhigh"}}, {"reasoning_effort": "high"}),
    ({"thinking": {"type": "disabled"}, "top_k": 5, "metadata": {"user_id": "u"}, "service_tier": "auto"}, {}),
    ({"temperature": 0.2, "top_p": 0.9, "stop_sequences": ["END"]}, {"temperature": 0.2, "top_p": 0.9,
                                                                     "stop": ["END"]}),
])
def test_fields_in_the_chat_apis_words(fields: dict[str, Any], chat: dict[str, Any]) -> None:
    assert chat_body(body(**fields)) == {"model": "m", "max_tokens": 100, "stream": False, "messages": HELLO, **chat}


@pytest.mark.parametrize(("fields", "refusal"), [
    ({"max_tokens": None}, "max_tokens: Field required"),
    ({"container": "c1"}, "container: containers are Anthropic's code execution sandboxes"),
    ({"mcp_servers": []}, "mcp_servers: Anthropic's MCP connector is not served"),
    ({"output_config": {"format": {"type": "json_schema", "schema": {}}}}, "output_config.format: not served"),
    ({"frobnicate": 1}, "frobnicate: this field is not served"),
    ({"tools": [{"type": "bash_20250124", "name": "bash"}]}, "tools.0.type: 'bash_20250124' is one of Anthropic's"),
    ({"messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]},
     "messages.0.content.0.type: document blocks (PDFs, text documents, citations) are not served"),
    ({"messages": [{"role": "assistant", "content": [{"type": "server_tool_use", "id": "s", "name": "web_search",
                                                      "input": {}}]}]},
     "messages.0.content.0.type: 'server_tool_use' blocks are not served by toolbridge"),
    ({"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "file", "file_id": "f"}}]}]},
     "messages.0.content.0.source: images from Anthropic's Files API are not served"),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": "x", "citations": [{}]}]}]},
     "messages.0.content.0.citations: citations are not served"),
])
def test_what_cannot_be_said_is_refused_naming_the_field(fields: dict[str, Any], refusal: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        chat_body({key: value for key, value in body(**fields).items() if value is not None})
    assert refused.value.message.startswith(refusal), refused.value.message


def test_tool_results_come_first_with_their_images_after_them() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Look."},
                                     {"type": "tool_result", "tool_use_id": "t1", "content": [
                                         {"type": "text", "text": "a photo"}, image]}]},
    ]
    assert chat_body(body(messages=messages, system="You see."))["messages"] == [
        {"role": "system", "content": "You see.\n\nBe brief."},  # one system message, first (Gemma's template)
        {"role": "tool", "tool_call_id": "t1", "content": "a photo"},
        {"role": "user", "content": [
            {"type": "text", "text": "Images returned by the tool calls above:"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            {"type": "text", "text": "Look."}]},
    ]


def test_a_system_message_after_the_users_joins_the_system_prompt() -> None:
    """Claude Code sends one; a chat template that takes a system message only first would refuse the request."""
    messages = [{"role": "user", "content": "Hi."}, {"role": "system", "content": "Reminder."},
                {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Bye."}]
    chat = chat_body(body(messages=messages))["messages"]
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "user"]
    assert chat[0] == {"role": "system", "content": "Reminder."}


def test_blocks_never_interleave_and_client_calls_come_last() -> None:
    blocks = MessageBlocks("m")
    events = [event for part in [
        Delta(reasoning="Thinking."), Delta("Let me check."), Delta(reasoning="Calling x\n"),
        CallsDone([], []), Delta("Done.", reasoning="More."),
        Ended("length", Usage(7, 3, 10), [ToolCall("c1", "clock", '{"zone": "UTC"}'), ToolCall("c2", "clock", "{")]),
    ] for event in blocks.spell(part)]
    starts = [(e["index"], e["content_block"]["type"]) for e in events if e["type"] == "content_block_start"]
    assert starts == [(0, "thinking"), (1, "text"), (2, "thinking"), (3, "text"), (4, "tool_use"), (5, "tool_use")]
    opened: set[int] = set()
    for event in events:  # each block is stopped before the next starts
        if event["type"] == "content_block_start":
            assert opened == set()
            opened.add(event["index"])
        elif event["type"] == "content_block_stop":
            opened.remove(event["index"])
    assert blocks.message["content"] == [
        {"type": "thinking", "thinking": "Thinking.", "signature": ""},
        {"type": "text", "text": "Let me check."},
        {"type": "thinking", "thinking": "Calling x\nMore.", "signature": ""},
        {"type": "text", "text": "Done."},
        {"type": "tool_use", "id": "c1", "name": "clock", "input": {"zone": "UTC"}},
        {"type": "tool_use", "id": "c2", "name": "clock", "input": {}},  # arguments that are not an object
    ]
    assert events[-2] == {"type": "message_delta", "delta": {"stop_reason": "max_tokens", "stop_sequence": None},
                          "usage": {"input_tokens": 7, "output_tokens": 3}}
    assert events[-1] == {"type": "message_stop"} and blocks.message["stop_reason"] == "max_tokens"


def test_the_shutdown_cut_off_is_an_error_event_the_sdk_raises() -> None:
    (event,) = messages_cut_off()
    assert event["type"] == "error" and event["error"]["type"] == "overloaded_error"
    assert "shutting down" in event["error"]["message"]
    frame = server_sent(event).decode()
    assert frame.startswith("event: error\ndata: {") and frame.endswith("}\n\n")
