"""One eval turn through any of the gateway's front doors: the chat body the eval builds, sent as that door's
clients send it, and the answer read back the same way for every door: its content (with the details trace the
scoring reads), the client's own tool calls it ends with, and the prompt tokens.

Raw HTTP rather than each door's SDK: the eval measures the model's choices, and one reader per wire format keeps
what is scored identical across doors. The doors' own clients are driven in tests/test_door_*.py.
"""

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from bench.eval.prompting import ANSWER_TOKENS

DOORS = ("chat", "responses", "messages", "ollama")
HEADERS = {"X-Toolbridge-Trace": "details"}  # the calls go into the content, where scoring finds them
# Anthropic's API needs max_tokens: the bound every other door gets from the model server when it sends none (more
# let a rambling answer run to thousands of tokens, and changed what is scored).
MAX_TOKENS = ANSWER_TOKENS

Answer = tuple[str, list[tuple[str, dict[str, Any]]], int]


def ask(door: str, client: httpx.Client, base: str, body: dict[str, Any]) -> Answer:
    """The answer to one chat body (model, messages of user and assistant text, stream, temperature, tools)."""
    return _ASKERS[door](client, base, body)


def _chat(client: httpx.Client, base: str, body: dict[str, Any]) -> Answer:
    if not body["stream"]:
        answer = _posted(client, f"{base}/v1/chat/completions", body)
        message = answer["choices"][0]["message"]
        return (message["content"] or "", [_call(c["function"]) for c in message.get("tool_calls") or []],
                (answer.get("usage") or {}).get("prompt_tokens") or 0)
    parts, calls, tokens = [], {}, 0
    for line in _lines(client, f"{base}/v1/chat/completions", {**body, "stream_options": {"include_usage": True}}):
        if line.startswith("data: {"):
            chunk = _unless_error(json.loads(line[6:]))
            tokens = (chunk.get("usage") or {}).get("prompt_tokens") or tokens
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                parts.append(delta.get("content") or "")
                for piece in delta.get("tool_calls") or []:
                    call = calls.setdefault(piece.get("index", 0), {"name": "", "arguments": ""})
                    function = piece.get("function") or {}
                    call["name"] += function.get("name") or ""
                    call["arguments"] += function.get("arguments") or ""
    return "".join(parts), [_call(calls[i]) for i in sorted(calls)], tokens


def _responses(client: httpx.Client, base: str, body: dict[str, Any]) -> Answer:
    sent = {"model": body["model"], "input": body["messages"], "stream": body["stream"],
            "temperature": body["temperature"], "store": False}
    if body.get("tools"):
        sent["tools"] = [{"type": "function", **tool["function"]} for tool in body["tools"]]
    if not body["stream"]:
        return _read_response(_posted(client, f"{base}/v1/responses", sent))
    parts, response = [], {}
    for event in _sse_data(_lines(client, f"{base}/v1/responses", sent)):
        if event.get("type") == "error":
            raise ValueError(event.get("message") or event)
        if event.get("type") == "response.output_text.delta":
            parts.append(event["delta"])
        elif event.get("type") in ("response.completed", "response.incomplete"):
            response = event["response"]
    _, calls, tokens = _read_response(response)
    return "".join(parts), calls, tokens


def _read_response(response: dict[str, Any]) -> Answer:
    items = response.get("output") or []
    text = "".join(part.get("text", "") for item in items if item.get("type") == "message"
                   for part in item.get("content") or [] if part.get("type") == "output_text")
    calls = [_call(item) for item in items if item.get("type") == "function_call"]
    return text, calls, (response.get("usage") or {}).get("input_tokens") or 0


def _messages(client: httpx.Client, base: str, body: dict[str, Any]) -> Answer:
    sent = {"model": body["model"], "messages": body["messages"], "stream": body["stream"],
            "temperature": body["temperature"], "max_tokens": MAX_TOKENS}
    if body.get("tools"):
        sent["tools"] = [{"name": tool["function"]["name"], "description": tool["function"].get("description", ""),
                          "input_schema": tool["function"].get("parameters") or {"type": "object"}}
                         for tool in body["tools"]]
    if not body["stream"]:
        message = _posted(client, f"{base}/v1/messages", sent)
        blocks = message.get("content") or []
        return ("".join(b.get("text", "") for b in blocks if b.get("type") == "text"),
                [(b["name"], b.get("input") or {}) for b in blocks if b.get("type") == "tool_use"],
                (message.get("usage") or {}).get("input_tokens") or 0)
    parts, tools, tokens = [], {}, 0
    for event in _sse_data(_lines(client, f"{base}/v1/messages", sent)):
        kind = event.get("type")
        if kind == "error":
            raise ValueError((event.get("error") or {}).get("message") or event)
        if kind == "message_start":
            tokens = ((event.get("message") or {}).get("usage") or {}).get("input_tokens") or 0
        elif kind == "message_delta":  # the final count, as the SDK reads it; a gateway knows it only at the end
            tokens = (event.get("usage") or {}).get("input_tokens") or tokens
        elif kind == "content_block_start" and event["content_block"].get("type") == "tool_use":
            tools[event["index"]] = {"name": event["content_block"]["name"], "arguments": ""}
        elif kind == "content_block_delta" and event["delta"].get("type") == "text_delta":
            parts.append(event["delta"]["text"])
        elif kind == "content_block_delta" and event["delta"].get("type") == "input_json_delta":
            tools[event["index"]]["arguments"] += event["delta"]["partial_json"]
    return "".join(parts), [_call(tools[i]) for i in sorted(tools)], tokens


def _ollama(client: httpx.Client, base: str, body: dict[str, Any]) -> Answer:
    sent = {"model": body["model"], "messages": body["messages"], "stream": body["stream"],
            "options": {"temperature": body["temperature"]}}
    if body.get("tools"):
        sent["tools"] = body["tools"]
    lines = ([json.dumps(_posted(client, f"{base}/api/chat", sent))] if not body["stream"]
             else list(_lines(client, f"{base}/api/chat", sent)))
    parts, calls, tokens = [], [], 0
    for line in filter(None, lines):
        piece = json.loads(line)
        if "error" in piece:
            raise ValueError(piece["error"])
        message = piece.get("message") or {}
        parts.append(message.get("content") or "")
        calls += [(call["function"]["name"], call["function"].get("arguments") or {})
                  for call in message.get("tool_calls") or []]
        tokens = piece.get("prompt_eval_count") or tokens
    return "".join(parts), calls, tokens


def _posted(client: httpx.Client, url: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(url, json=body, headers=HEADERS)
    response.raise_for_status()
    return _unless_error(response.json())


def _lines(client: httpx.Client, url: str, body: dict[str, Any]) -> Iterator[str]:
    with client.stream("POST", url, json=body, headers=HEADERS) as response:
        response.raise_for_status()
        yield from response.iter_lines()


def _sse_data(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if line.startswith("data: {"):
            yield json.loads(line[6:])


def _unless_error(payload: dict[str, Any]) -> dict[str, Any]:
    """An error event after the answer began (OpenAI's shape) fails the turn, as an HTTP error does."""
    if isinstance(payload.get("error"), dict) and payload.get("type") != "error":
        raise ValueError(payload["error"].get("message"))
    return payload


def _call(function: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except ValueError:
        arguments = {}
    return function.get("name", ""), arguments if isinstance(arguments, dict) else {}


_ASKERS: dict[str, Callable[[httpx.Client, str, dict[str, Any]], Answer]] = {
    "chat": _chat, "responses": _responses, "messages": _messages, "ollama": _ollama,
}
