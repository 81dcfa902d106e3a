"""The Responses door's pure halves: a request read into a chat body (what is translated, what is refused and
named), and the answer's parts written as a response (items in order, the ending, the conversation kept)."""

from dataclasses import dataclass
from typing import Any

import pytest

from app.chat.answer.parts import CallsDone, Delta, Ended
from app.doors.responses.answer import ResponseWriter
from app.doors.responses.request import read_request
from app.openai.accumulate import ToolCall, Usage
from app.openai.errors import InvalidRequest

CALL = {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"word": "a"}'}
CALL2 = {"type": "function_call", "call_id": "c2", "name": "lookup", "arguments": '{"word": "b"}'}


def chat(body: dict[str, Any]) -> dict[str, Any]:
    request = read_request({"model": "m", **body})
    return {**request.chat_body, "messages": request.chat_messages([])}


def test_input_items_become_the_chat_conversation_a_chat_client_would_send() -> None:
    sent_back = [
        {"role": "user", "content": [{"type": "input_text", "text": "Look "}, {"type": "input_text", "text": "up"},
                                     {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "trace"}]},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "output_text", "text": "Let me check.", "annotations": []}]},
        {"type": "mcp_call", "id": "mcp_1", "server_label": "toolbridge", "name": "echo", "arguments": "{}"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "\n\nBoth:"}]},
        CALL, CALL2,
        {"type": "function_call_output", "call_id": "c1", "output": "A"},
        {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "B"}]},
    ]
    body = chat({"input": sent_back, "instructions": "Be brief."})
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Look "}, {"type": "text", "text": "up"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
        {"role": "assistant", "content": "Let me check.\n\nBoth:", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"word": "a"}'}},
            {"id": "c2", "type": "function", "function": {"name": "lookup", "arguments": '{"word": "b"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "A"},
        {"role": "tool", "tool_call_id": "c2", "content": "B"},
    ]


def test_the_request_fields_map_onto_the_chat_body() -> None:
    body = chat({
        "input": "hi", "stream": True, "max_output_tokens": 99, "temperature": 0.2, "top_p": 0.9,
        "parallel_tool_calls": False, "reasoning": {"effort": "low", "summary": "auto"}, "user": "u1",
        "metadata": {"toolbridge_tools": "basic"}, "store": False, "prompt_cache_key": "k", "truncation": "auto",
        "tools": [{"type": "function", "name": "f", "description": "F.", "parameters": {"type": "object"},
                   "strict": True}],
        "tool_choice": {"type": "function", "name": "f"},
        "text": {"format": {"type": "json_schema", "name": "out", "schema": {"type": "object"}, "strict": True}},
    })
    assert body == {
        "model": "m", "stream": True, "max_tokens": 99, "temperature": 0.2, "top_p": 0.9,
        "parallel_tool_calls": False, "reasoning_effort": "low", "user": "u1",
        "metadata": {"toolbridge_tools": "basic"}, "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "f", "description": "F.",
                                                    "parameters": {"type": "object"}, "strict": True}}],
        "tool_choice": {"type": "function", "function": {"name": "f"}},
        "response_format": {"type": "json_schema",
                            "json_schema": {"name": "out", "schema": {"type": "object"}, "strict": True}},
    }
    assert chat({"input": "hi", "text": {"format": {"type": "json_object"}}, "tool_choice": "required"}) == {
        "model": "m", "stream": False, "messages": [{"role": "user", "content": "hi"}], "tool_choice": "required",
        "response_format": {"type": "json_object"}}


@pytest.mark.parametrize(("body", "param"), [
    ({"tools": [{"type": "function", "name": "f"}, {"type": "file_search", "vector_store_ids": ["v"]}]},
     "tools[1].type"),
    ({"tools": [{"type": "mcp", "server_label": "x", "server_url": "https://x"}]}, "tools[0].type"),
    ({"tool_choice": {"type": "web_search_preview"}}, "tool_choice"),
    ({"background": True}, "background"),
    ({"conversation": "conv_1"}, "conversation"),
    ({"prompt": {"id": "pmpt_1"}}, "prompt"),
    ({"frequency_penalty": 1}, "frequency_penalty"),
    ({"stream": "yes"}, "stream"),
    ({"text": {"format": {"type": "json_schema"}}}, "text.format"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]}, "input[0].content[0].type"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]},
     "input[0].content[0].image_url"),
    ({"input": [{"role": "tool", "content": "x"}]}, "input[0].role"),
    ({"input": [{"type": "function_call", "call_id": "c", "name": "f"}]}, "input[0].arguments"),
    ({"input": []}, "input"),
])
def test_what_cannot_be_served_is_refused_naming_the_field(body: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        chat({"input": "hi", **body})
    assert refused.value.param == param and refused.value.status_code == 400


@dataclass
class Output:
    content: str
    is_error: bool = False
    error_message: str | None = None


def test_the_writer_keeps_the_answer_in_order_and_says_an_incomplete_ending() -> None:
    writer = ResponseWriter("m", {"tools": []})
    events = writer.begin()
    call = ToolCall("1", "basic__echo", '{"text": "hi"}')
    for part in [Delta(reasoning="thinking"), Delta("Checking."), Delta(reasoning="Calling basic__echo"),
                 CallsDone([call], [Output('{"status": "error"}', True, "boom")]), Delta("\n\nCut"),
                 Ended("length", Usage(7, 3, 10), [ToolCall("c9", "lookup", "{}")])]:
        events += writer.take(part)
    events.append(writer.finished())
    response = writer.response
    assert [item["type"] for item in response["output"]] == [
        "reasoning", "message", "reasoning", "mcp_call", "message", "function_call"]
    assert response["status"] == "incomplete" and response["incomplete_details"] == {"reason": "max_output_tokens"}
    failed = response["output"][3]
    assert failed["status"] == "failed" and failed["error"]["content"][0]["text"] == "boom"
    assert response["output"][4]["status"] == "incomplete"
    assert response["usage"]["input_tokens"] == 7 and response["usage"]["output_tokens"] == 3
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    assert events[-1]["type"] == "response.incomplete" and "response.mcp_call.failed" in [e["type"] for e in events]
    assert writer.message == {"role": "assistant", "content": "Checking.\n\nCut", "tool_calls": [
        {"id": "c9", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]}


def test_an_image_for_the_person_goes_into_the_message_of_the_words_said_next() -> None:
    """Codex prints, and `codex exec -o` writes, the last message item as the answer: the image's link waits for
    the model's next words past the mcp_call and a later round's reasoning, and the answer's text is unchanged."""
    writer = ResponseWriter("m", {"tools": []})
    call, link = ToolCall("1", "pictures__picture", "{}"), "\n\n![🖼 picture](http://gw/images/x)\n\n"
    for part in [Delta(reasoning="Calling pictures__picture"), CallsDone([call], [Output("an image")]),
                 Delta(link, shown=True), Delta("\n\n"), Delta(reasoning="The picture came."), Delta("Here it is."),
                 Ended("stop", None)]:
        writer.take(part)
    output = writer.response["output"]
    assert [item["type"] for item in output] == ["reasoning", "mcp_call", "reasoning", "message"]
    assert output[-1]["content"][0]["text"] == link + "\n\nHere it is." == writer.message["content"]
    alone = ResponseWriter("m", {"tools": []})  # nothing said after it: the image is the answer's last message
    for part in [CallsDone([call], [Output("an image")]), Delta(link, shown=True), Ended("stop", None)]:
        alone.take(part)
    assert [item["type"] for item in alone.response["output"]] == ["mcp_call", "message"]
    assert alone.response["output"][-1]["content"][0]["text"] == link


def test_a_summary_is_spelled_as_the_reasoning_items_summary_and_none_asked_keeps_the_raw_text() -> None:
    for reasoning, summary in [({"summary": "auto"}, True), ({"generate_summary": "detailed"}, True),
                               ({"summary": "none"}, False), ({"summary": ["auto"]}, False), ({"effort": "low"}, False),
                               (None, False)]:
        assert read_request({"model": "m", "input": "hi", "reasoning": reasoning}).summary is summary
    writer = ResponseWriter("m", {"tools": []}, summary=True)
    events = [*writer.take(Delta(reasoning="Calling ")), *writer.take(Delta(reasoning="x")),
              *writer.take(Ended("stop", None))]
    assert [event["type"] for event in events] == [
        "response.output_item.added", "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta", "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done"]
    assert events[1]["part"] == {"type": "summary_text", "text": ""} and events[1]["summary_index"] == 0
    assert events[4]["text"] == "Calling x" and events[5]["part"] == {"type": "summary_text", "text": "Calling x"}
    item = writer.response["output"][0]
    assert item == events[-1]["item"] and item["summary"] == [{"type": "summary_text", "text": "Calling x"}]
    assert "content" not in item and events[0]["item"]["summary"] == []


def test_codex_request_fields_are_read_and_its_client_metadata_left_out() -> None:
    """The top-level fields Codex CLI 0.169 sends with every turn (seen on the wire), `client_metadata` its
    session's ids and sandbox mode for OpenAI's analytics: nothing for the model."""
    body = chat({
        "instructions": "You are Codex.", "stream": True, "store": False, "parallel_tool_calls": True,
        "tool_choice": "auto", "reasoning": {"summary": "auto"}, "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "019a", "client_metadata": {"turn_id": "019a", "x-codex-window-id": "019a:0"},
        "input": [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Rules."}]},
                  {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What time?"}]}],
        "tools": [{"type": "function", "name": "exec_command", "description": "Runs a command.", "strict": False,
                   "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}],
    })
    assert "client_metadata" not in body and body["stream"] is True and body["parallel_tool_calls"] is True
    assert body["messages"][-1] == {"role": "user", "content": "What time?"}
    assert [tool["function"]["name"] for tool in body["tools"]] == ["exec_command"]


LOOKUP_TOOL = {"type": "function", "name": "lookup", "parameters": {"type": "object"}}
NAMESPACE = {"type": "namespace", "name": "agents", "description": "Sub-agents.", "tools": [
    {"type": "function", "name": "spawn", "description": "Starts one.", "parameters": {"type": "object"}}]}


def test_a_namespace_tools_functions_are_offered_by_their_full_name_and_read_back() -> None:
    """Codex groups its sub-agent tools in a `namespace` tool; a chat API has no namespaces, so the model gets
    `agents__spawn`, and a call sent back with its `namespace` is that name again."""
    request = read_request({"model": "m", "tools": [LOOKUP_TOOL, NAMESPACE], "input": [
        {"type": "function_call", "call_id": "c1", "namespace": "agents", "name": "spawn", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "started"}]})
    assert [tool["function"]["name"] for tool in request.chat_body["tools"]] == ["lookup", "agents__spawn"]
    assert request.chat_body["tools"][1]["function"]["description"] == "Starts one."
    assert request.namespaced == {"agents__spawn": ("agents", "spawn")}
    assert request.input_messages[0]["tool_calls"][0]["function"]["name"] == "agents__spawn"


def test_a_namespaced_call_is_handed_back_with_its_namespace() -> None:
    writer = ResponseWriter("m", {"tools": []}, namespaced={"agents__spawn": ("agents", "spawn")})
    events = writer.begin() + writer.take(Ended("tool_calls", None, [ToolCall("c1", "agents__spawn", "{}"),
                                                                       ToolCall("c2", "lookup", "{}")]))
    spawn, lookup = writer.response["output"]
    assert (spawn["namespace"], spawn["name"], lookup["name"]) == ("agents", "spawn", "lookup")
    assert "namespace" not in lookup
    done = [event for event in events if event["type"] == "response.function_call_arguments.done"]
    assert [event["name"] for event in done] == ["spawn", "lookup"]
    assert writer.message["tool_calls"][0]["function"]["name"] == "agents__spawn"  # as the model called it


def test_a_hosted_tool_in_a_namespace_is_refused_naming_it() -> None:
    inner = {**NAMESPACE, "tools": [*NAMESPACE["tools"], {"type": "custom", "name": "free"}]}
    with pytest.raises(InvalidRequest) as refused:
        read_request({"model": "m", "input": "hi", "tools": [inner]})
    assert refused.value.param == "tools[0].tools[1].type"


def test_a_stream_cut_off_ends_with_an_error_and_response_failed() -> None:
    """Codex reads a failure's message from `response.failed` (an `error` event alone is unknown to it)."""
    writer = ResponseWriter("m", {"tools": []})
    begun = writer.begin()
    error, failed = writer.cut_off()
    assert (error["type"], error["code"]) == ("error", "shutting_down")
    assert failed["type"] == "response.failed" and failed["sequence_number"] == len(begun) + 1
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["error"] == {"code": "shutting_down", "message": error["message"]}
