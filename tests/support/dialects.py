"""Tool-call turns as each upstream really streams them (shapes from their code, docs and bug reports).

Every recording calls `basic__echo` with {"text": "hi"} in its own dialect. See
../shared/notes/protocol-facts.md §4 for where each quirk comes from.
"""

from typing import Any

ARGS = '{"text": "hi"}'


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


DIALECTS: dict[str, list[dict[str, Any] | str]] = {
    # Numeric-string id on the first delta only, `name: ""` on continuations, reasoning_content first.
    "lmstudio": [
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning_content": "The user wants an echo."}),
        chunk({"tool_calls": [{"index": 0, "id": "814890118", "type": "function",
                               "function": {"name": "basic__echo", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"name": "", "arguments": '{"text"'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"name": "", "arguments": ': "hi"}'}}]}),
        chunk({}, "tool_calls"),
    ],
    # LM Studio 0.4.12: empty id and the whole arguments in one chunk.
    "lmstudio-whole": [
        chunk({"role": "assistant", "tool_calls": [{"index": 0, "id": "", "type": "function",
                                                    "function": {"name": "basic__echo", "arguments": ARGS}}]}),
        chunk({}, "tool_calls"),
    ],
    # Ollama: role on every chunk, the whole call in one chunk, `reasoning`, fp_ollama.
    "ollama": [
        chunk({"role": "assistant", "content": "", "reasoning": "Echo it."}, system_fingerprint="fp_ollama"),
        chunk({"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_ab12", "index": 0, "type": "function", "function": {"name": "basic__echo", "arguments": ARGS}}
        ]}, system_fingerprint="fp_ollama"),
        chunk({"role": "assistant", "content": ""}, "tool_calls", system_fingerprint="fp_ollama"),
    ],
    # vLLM: no ids at all; the gateway generates them.
    "vllm": [
        chunk({"role": "assistant"}),
        chunk({"tool_calls": [{"index": 0, "type": "function", "function": {"name": "basic__echo"}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ARGS}}]}),
        chunk({}, "tool_calls"),
    ],
    # Content and a tool call in one turn (the text is relayed, the call is run).
    "content-and-call": [
        chunk({"role": "assistant", "content": "Let me echo that. "}),
        chunk({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "basic__echo", "arguments": ARGS}}]}),
        chunk({}, "tool_calls"),
    ],
    # No finish_reason at all (the stream still ends with [DONE]), and `stop` even though a call was made.
    "no-finish-reason": [
        chunk({"role": "assistant", "tool_calls": [{"index": 0, "id": "c2", "function": {
            "name": "basic__echo", "arguments": ARGS}}]}),
    ],
    "stop-with-call": [
        chunk({"tool_calls": [{"index": 0, "id": "c3", "function": {"name": "basic__echo", "arguments": ARGS}}]}),
        chunk({}, "stop"),
    ],
    # Tool calls the server did not parse, printed as text.
    "hermes-text": [
        chunk({"content": "<tool_"}),
        chunk({"content": 'call>{"name": "basic__echo", "arguments": {"text": "hi"}}</tool'}),
        chunk({"content": "_call>"}),
        chunk({}, "stop"),
    ],
    "lmstudio-text": [
        chunk({"content": '[TOOL_REQUEST]{"name": "basic__echo", "arguments": {"text": "hi"}}[END_TOOL_REQUEST]'}),
        chunk({}, "stop"),
    ],
    "bare-json": [
        chunk({"content": '{"name": "basic__echo", '}),
        chunk({"content": '"arguments": {"text": "hi"}}'}),
        chunk({}, "stop"),
    ],
    "think-tags": [
        chunk({"content": "<think>I should echo</think>"}),
        chunk({"tool_calls": [{"index": 0, "id": "c4", "function": {"name": "basic__echo", "arguments": ARGS}}]}),
        chunk({}, "tool_calls"),
    ],
}
# Streams that end without [DONE].
NO_DONE = {"ollama"}  # a stream with neither [DONE] nor a finish_reason was cut off (tests/security/)
RELAYED_TEXT = {"content-and-call": "Let me echo that. "}
REASONING = {"lmstudio": "The user wants an echo.", "ollama": "Echo it.", "think-tags": "I should echo"}
