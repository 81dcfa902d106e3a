"""Inputs built to make the four doors (Chat Completions, Responses, Messages, Ollama) work hard: how long each
request takes, and the slowest /health answer while it runs (a blocked event loop shows there; the goal is under
100 ms on a quiet machine, so the load average is printed beside each figure). The audit's table (S5) first, then
bodies just under what a request may carry, then the doors' own. The set-up is bench/hostile_inputs.py's:
`toolbridge` with five copies of the basic test server (60 tools, a budget of 4, so every request is ranked),
SQLite memory, a stand-in model that answers "fine".

    .venv/bin/python -m bench.hostile_doors [--source DIR] [--only TEXT] [--repeat N] [--chain 40]
"""

import argparse
import base64
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from bench.hostile_inputs import MB, hostile_gateway, while_probing_health

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 30_000).decode()  # 40 KB of base64


def _body(value: dict[str, object]) -> bytes:
    return json.dumps(value).encode()


def _responses(**fields: object) -> tuple[str, bytes]:
    return "/v1/responses", _body({"model": "m", "store": False, **fields})


def _messages(**fields: object) -> tuple[str, bytes]:
    return "/v1/messages", _body({"model": "m", "max_tokens": 10, **fields})


def _ollama(**fields: object) -> tuple[str, bytes]:
    return "/api/chat", _body({"model": "m", "stream": False, **fields})


def _function(number: int) -> dict[str, object]:
    return {"type": "function", "function": {"name": f"f{number}", "parameters": {"type": "object"}}}


USER = {"role": "user", "content": "hi"}


def _turns(count: int) -> list[dict[str, object]]:
    """`count` distinct messages, user and assistant in turn, then the question: the audit's (S5) conversation."""
    return [{"role": ("user", "assistant")[n % 2], "content": f"m{n}"} for n in range(count)] + [USER]


def _png(megabytes: float) -> str:
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * int(megabytes * 750_000)).decode()


# The audit's table (security.md S5): each body under the 50 MB limit, each a conversation no model holds.
AUDIT: dict[str, Callable[[], tuple[str, bytes]]] = {
    "S5 chat: 200,000 messages": lambda: ("/v1/chat/completions", _body({"model": "m", "messages": _turns(200_000)})),
    "S5 chat: 1,200,000 messages (the body limit)": lambda: ("/v1/chat/completions", _body(
        {"model": "m", "messages": _turns(1_200_000)})),
    "S5 messages: 200,000 messages": lambda: _messages(messages=_turns(200_000)),
    "S5 ollama: 200,000 messages": lambda: _ollama(messages=_turns(200_000)),
    "S5 responses: 200,000 input items": lambda: _responses(input=[
        {"role": "user", "content": f"m{n}"} for n in range(200_000)]),
    "S5 messages: 200,000 content blocks": lambda: _messages(messages=[{"role": "user", "content": [
        {"type": "text", "text": "a"}] * 200_000}]),
    "S5 responses: 200,000 content parts": lambda: _responses(input=[{"role": "user", "content": [
        {"type": "input_text", "text": "a"}] * 200_000}]),
    "S5 ollama: one 30 MB image": lambda: _ollama(messages=[{**USER, "images": [_png(30)]}]),
    "S5 ollama: 2,000 images": lambda: _ollama(messages=[{**USER, "images": [_png(0.02)] * 2000}]),
}
# Just under what one request may carry (app/api/chat_body.py): 10,000 messages, 20,000 content parts, 2,000
# tools, 250,000 JSON values, each in the shape that costs the gateway the most.
def _chat(**fields: object) -> tuple[str, bytes]:
    return "/v1/chat/completions", _body({"model": "m", **fields})


def _schema(fields: int) -> dict[str, object]:
    return {"type": "object", "properties": {f"p{n}": {"type": "string"} for n in range(fields)}}


AT_THE_BOUNDS: dict[str, Callable[[], tuple[str, bytes]]] = {
    "bound chat: 10,000 messages": lambda: _chat(messages=_turns(9_999)),
    "bound messages: 10,000 messages": lambda: _messages(messages=_turns(9_999)),
    "bound ollama: 10,000 messages": lambda: _ollama(messages=_turns(9_999)),
    "bound responses: 10,000 input items": lambda: _responses(input=_turns(9_999)),
    "bound chat: 20,000 content parts": lambda: _chat(messages=[{"role": "user", "content": [
        {"type": "text", "text": "a"}] * 20_000}]),
    "bound messages: 80,000 content blocks": lambda: _messages(messages=[{"role": "user", "content": [
        {"type": "text", "text": "a"}] * 80_000}]),
    "bound responses: 80,000 content parts": lambda: _responses(input=[{"role": "user", "content": [
        {"type": "input_text", "text": "a"}] * 80_000}]),
    "bound ollama: 20,000 images": lambda: _ollama(messages=[{**USER, "images": ["iVBORw0KGgo="] * 19_999}]),
    "bound chat: 2,000 tools of 50 parameters": lambda: _chat(messages=[USER], tools=[
        {"type": "function", "function": {"name": f"f{n}", "parameters": _schema(50)}} for n in range(2_000)]),
    "bound chat: 240,000 values in an unknown field": lambda: _chat(messages=[USER], extra=[{"a": 1}] * 120_000),
}
INPUTS: dict[str, Callable[[], tuple[str, bytes]]] = {
    **AUDIT,
    **AT_THE_BOUNDS,
    "chat completions (for comparison): 200,000 messages": lambda: ("/v1/chat/completions", _body(
        {"model": "m", "messages": [USER] * 200_000})),
    "responses: 200,000 input items": lambda: _responses(input=[{"role": "user", "content": "hi"}] * 200_000),
    "responses: 100,000 text parts": lambda: _responses(input=[{"role": "user", "content": [
        {"type": "input_text", "text": "hi "}] * 100_000}]),
    "responses: 20,000 function tools": lambda: _responses(input="hi", tools=[
        {"type": "function", "name": f"f{n}", "parameters": {"type": "object"}} for n in range(20_000)]),
    "responses: 40 MB input string": lambda: _responses(input="lorem ipsum " * (40 * MB // 12)),
    "messages: 200,000 messages": lambda: _messages(messages=[USER, {"role": "assistant", "content": "a"}] * 100_000
                                                    + [USER]),
    "messages: 200,000 text blocks": lambda: _messages(messages=[{"role": "user", "content": [
        {"type": "text", "text": "hi"}] * 200_000}]),
    "messages: 20,000 tools": lambda: _messages(messages=[USER], tools=[
        {"name": f"f{n}", "input_schema": {"type": "object"}} for n in range(20_000)]),
    "messages: 1,000 images of 40 KB": lambda: _messages(messages=[{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}] * 1000}]),
    "ollama: 200,000 messages": lambda: _ollama(messages=[USER] * 200_000),
    "ollama: 1,000 images of 40 KB": lambda: _ollama(messages=[{**USER, "images": [PNG] * 1000}]),
    "ollama: one image of 40 MB": lambda: _ollama(messages=[{**USER, "images": [
        base64.b64encode(b"\x89PNG" + b"\0" * (30 * MB)).decode()]}]),
    "ollama: 50,000 tool calls": lambda: _ollama(messages=[USER, {"role": "assistant", "tool_calls": [
        {"function": {"name": "f", "arguments": {"a": 1}}}] * 50_000}, USER]),
    "ollama: 20,000 tools": lambda: _ollama(messages=[USER], tools=[_function(n) for n in range(20_000)]),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=None, help="a checkout to run the gateway from")
    parser.add_argument("--chain", type=int, default=40, help="responses in the previous_response_id chain")
    parser.add_argument("--only", default="", help="run the inputs whose name holds this text")
    parser.add_argument("--repeat", type=int, default=1, help="send each input this many times; the slowest shown")
    args = parser.parse_args()
    with hostile_gateway(args.source) as base:
        print(f"{'input':<52} {'status':>6} {'request s':>10} {'slowest /health ms':>19} {'load':>5}")
        _, _, idle = while_probing_health(base, lambda: time.sleep(1) or "-")
        print(f"{'(nothing, for comparison: 1 s)':<52} {'-':>6} {1:>10.2f} {idle * 1000:>19.0f} "
              f"{os.getloadavg()[0]:>5.1f}", flush=True)
        for name, build in ((name, build) for name, build in INPUTS.items() if args.only in name):
            path, body = build()
            runs = [while_probing_health(base, lambda path=path, body=body: _post(base, path, body))
                    for _ in range(args.repeat)]
            status, seconds, slowest = max(runs, key=lambda run: run[2])
            print(f"{name:<52} {status:>6} {seconds:>10.2f} {slowest * 1000:>19.0f} {os.getloadavg()[0]:>5.1f}",
                  flush=True)
        if args.chain:
            chain(base, args.chain)


def _post(base: str, path: str, body: bytes) -> str:
    return str(httpx.post(f"{base}{path}", content=body, timeout=600,
                          headers={"Content-Type": "application/json"}).status_code)


def chain(base: str, length: int) -> None:
    """A previous_response_id chain of `length` responses of 1 MB of input each, then one more turn on it."""
    previous = None
    for _ in range(length):
        answer = httpx.post(f"{base}/v1/responses", timeout=600, json={
            "model": "m", "input": "x" * MB, "previous_response_id": previous})
        if answer.status_code != 200:
            print(f"chain stopped at {_ + 1}: {answer.status_code} {answer.text[:200]}")
            break
        previous = answer.json()["id"]
    body = _body({"model": "m", "input": "and?", "previous_response_id": previous})
    status, seconds, slowest = while_probing_health(base, lambda: _post(base, "/v1/responses", body))
    print(f"{f'responses: a chain of {length} x 1 MB':<52} {status:>6} {seconds:>10.2f} {slowest * 1000:>19.0f}")


if __name__ == "__main__":
    main()
