"""The turn (app/chat/turn.py): a chat body read once, its caller from the headers, and what choosing tools changes."""

from starlette.datastructures import Headers

from app.chat.offer.toolsets import choose_tools
from app.chat.turn import Caller, Turn
from app.openai.wire import ChatBody

BODY: ChatBody = {
    "model": "qwen3+files", "stream": True, "stream_options": {"include_usage": True}, "temperature": 0.2,
    "messages": [{"role": "user", "content": "hi"}], "metadata": {"toolbridge_tools": "fs", "user": "ann"},
    "tools": [{"type": "function", "function": {"name": "lookup"}}],
}


def test_a_body_is_read_once_into_the_turn() -> None:
    turn = Turn.read(BODY)
    assert turn.messages == ({"role": "user", "content": "hi"},) and turn.messages[0] is BODY["messages"][0]
    assert [tool["function"]["name"] for tool in turn.client_tools] == ["lookup"]
    assert (turn.model, turn.asked_model, turn.stream, turn.include_usage) == ("qwen3+files",) * 2 + (True, True)
    assert turn.sent is BODY  # nothing copied; the upstream gets it as sent but for what the gateway changes


def test_the_caller_is_what_the_headers_say_and_nothing_else() -> None:
    headers = Headers({"authorization": "Bearer sk-1", "x-openwebui-chat-id": "c1", "x-toolbridge-trace": "off",
                       "x-toolbridge-tools": "fs", "cookie": "session=secret"})  # as the request's (any case)
    assert Turn.from_request(BODY, headers).caller == Caller("sk-1", "c1", "off", "fs")
    assert Turn.from_request(BODY, Headers({})).caller == Caller(api_key="")  # as presented_key says: none


def test_choosing_tools_makes_a_new_turn_and_leaves_the_clients_body_as_sent() -> None:
    turn = Turn.read(BODY)
    chosen = choose_tools(turn.model, turn.sent.get("metadata"), None, {"files": ["fs"]}, lambda name: True)
    changed = turn.chosen(chosen)
    assert (changed.model, changed.asked_model) == ("qwen3", "qwen3+files")  # the answer names the model as asked
    assert changed.sent["model"] == "qwen3" and changed.sent["metadata"] == {"user": "ann"}
    assert BODY["model"] == "qwen3+files" and BODY["metadata"] == {"toolbridge_tools": "fs", "user": "ann"}
    plain = Turn.read({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert plain.chosen(choose_tools("m", None, None, {}, lambda name: True)) is plain
