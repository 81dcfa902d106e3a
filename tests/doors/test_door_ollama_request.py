"""Ollama's chat request made a chat completion's body (app/doors/ollama/request.py): what Open WebUI and the
`ollama` library send, translated whole, and what cannot be translated refused with the field named."""

import base64
import binascii
from typing import Any

import pytest

from app.doors.ollama.request import chat_body
from app.openai.errors import InvalidRequest

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
UNKNOWN_BYTES = "AAECAwQFBgc="


def test_open_webui_s_request_becomes_the_chat_api_s() -> None:
    body = {
        "model": "m", "keep_alive": "5m", "think": "max", "format": {"type": "object"},
        "options": {"temperature": 0.2, "top_p": 0.9, "seed": 7, "stop": ["END"], "num_predict": 64, "num_ctx": 8192},
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Look:", "images": [PNG, UNKNOWN_BYTES]},
            {"role": "assistant", "content": "", "thinking": "hm", "tool_calls": [
                {"id": "call_a", "function": {"index": 0, "name": "f", "arguments": {"x": 1}}},
                {"function": {"name": "g", "arguments": '{"y": 2}'}}]},
            {"role": "tool", "tool_call_id": "call_a", "content": "one"},  # Open WebUI's spelling: by id
            {"role": "tool", "tool_name": "g", "content": "two"},
        ],
    }
    chat = chat_body(body)
    assistant = chat["messages"][2]
    generated = assistant["tool_calls"][1]["id"]
    assert chat == {
        "model": "m", "stream": True, "reasoning_effort": "high",
        "response_format": {"type": "json_schema", "json_schema": {"name": "response", "schema": {"type": "object"}}},
        "temperature": 0.2, "top_p": 0.9, "seed": 7, "stop": ["END"], "max_tokens": 64,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [
                {"type": "text", "text": "Look:"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{UNKNOWN_BYTES}"}}]},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}},
                {"id": generated, "type": "function", "function": {"name": "g", "arguments": '{"y":2}'}}]},
            {"role": "tool", "tool_call_id": "call_a", "content": "one"},
            {"role": "tool", "tool_call_id": generated, "content": "two"},
        ],
    }
    assert generated.startswith("call_")


def test_small_forms_ollama_allows() -> None:
    chat = chat_body({"model": "m", "stream": False, "format": "json", "think": False, "options": {"num_predict": -1},
                      "messages": [{"role": "user", "images": [PNG]}]})
    assert chat == {"model": "m", "stream": False, "response_format": {"type": "json_object"},
                    "messages": [{"role": "user", "content": [
                        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]}]}


@pytest.mark.parametrize(("body", "named"), [
    ({"messages": [{"role": "user", "content": "hi"}]}, "`model`"),
    ({"model": "m", "messages": []}, "`messages`"),
    ({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": "yes"}, "`stream`"),
    ({"model": "m", "messages": [{"role": "robot", "content": "hi"}]}, "`messages[0].role`"),
    ({"model": "m", "messages": [{"role": "user", "content": ["hi"]}]}, "`messages[0].content`"),
    ({"model": "m", "messages": [{"role": "user", "content": "hi", "images": ["not base64!"]}]}, "messages[0].images"),
    ({"model": "m", "messages": [{"role": "assistant", "content": "", "images": [PNG]}]}, "messages[0].images"),
    ({"model": "m", "messages": [{"role": "tool", "tool_name": "f", "content": "1"}]}, "`messages[0]`"),
    ({"model": "m", "messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": [1]}}]}]},
     "messages[0].tool_calls[0].function.arguments"),
    ({"model": "m", "messages": [{"role": "user", "content": "hi"}], "think": "very"}, "`think`"),
    ({"model": "m", "messages": [{"role": "user", "content": "hi"}], "format": "yaml"}, "`format`"),
    ({"model": "m", "messages": [{"role": "user", "content": "hi"}], "options": {"num_predict": "9"}},
     "options.num_predict"),
])
def test_what_cannot_be_translated_is_refused_naming_the_field(body: dict[str, Any], named: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        chat_body(body)
    assert named in refused.value.message and refused.value.status_code == 400


@pytest.mark.parametrize("image", [
    PNG, UNKNOWN_BYTES, "", "AAAA", "AAA=", "AA==", "AAAAAAA=", "A", "AAAAA", "AAAA=AAA", "AA==AAAA", "AAAA AAA", "é",
    "AAAAAAAA" + "AAA=", PNG.replace("A", "-", 1),
])
def test_an_image_decoded_in_slices_is_taken_or_refused_as_decoded_whole(
    image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slices of 8 characters, so that padding, stray characters and a short end fall in any slice."""
    monkeypatch.setattr("app.doors.ollama.messages._DECODED_AT_ONCE", 8)
    try:
        expected: bytes | None = base64.b64decode(image, validate=True)
    except (binascii.Error, ValueError):
        expected = None
    body = {"model": "m", "messages": [{"role": "user", "content": "", "images": [image]}]}
    if expected is None:
        with pytest.raises(InvalidRequest, match="base64"):
            chat_body(body)
        return
    [part] = chat_body(body)["messages"][0]["content"]
    assert part["image_url"]["url"].endswith(f";base64,{image}")
    assert part["image_url"]["url"].startswith("data:image/png" if expected.startswith(b"\x89PNG") else "data:image/")
