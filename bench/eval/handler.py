"""The eval's chat handler for llama-cpp-python: tool calls a 135M model can make, under grammars.

llama-cpp-python's stock `chatml-function-calling` handler cannot close a tool loop (issue 10: empty
`auto` answers, 500 on `required`, `tool` messages dropped). Here each turn is one decision written under
a grammar ("I will answer directly." or "I will call NAME."), then, for a call, the arguments under a
grammar built from that tool's schema; for an answer, free text. The prompt uses the model's own chat
template. Which choice is made is the model's: nothing reads the user's words (see prompting.py).

Registered as chat format "toolbridge-eval" by importing this module (serve_model.py does).
"""

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

from llama_cpp import Llama, LlamaGrammar
from llama_cpp.llama_chat_format import Jinja2ChatFormatter, register_chat_completion_handler

from bench.eval.prompting import (
    ANSWER_TOKENS,
    ARGUMENTS,
    CALL,
    allowed,
    choice_grammar,
    conversation,
    offered_tools,
    parse_choice,
)

FORMAT = "toolbridge-eval"
CHOICE_TOKENS = 48
ARGUMENT_TOKENS = 256
ANY_OBJECT = {"type": "object"}
# Base models (Gemma 3 270M from PyPI) ship no chat template: Gemma's own turn format, system folded into
# the first user turn as Gemma's instruction-tuned template does; other families get plain role lines.
GEMMA_TURNS = (
    "{% for m in messages %}{% if m.role == 'system' %}{% set ns = m.content %}"
    "{% else %}<start_of_turn>{{ 'model' if m.role == 'assistant' else 'user' }}\n"
    "{% if loop.index0 == 1 and messages[0].role == 'system' %}{{ messages[0].content }}\n\n{% endif %}"
    "{{ m.content }}<end_of_turn>\n{% endif %}{% endfor %}<start_of_turn>model"
)  # llama.cpp adds <bos>; Jinja drops a final newline, so _prompt adds it
PLAIN_TURNS = (
    "{% for m in messages %}{{ m.role | capitalize }}: {{ m.content }}\n\n{% endfor %}Assistant:"
)


@register_chat_completion_handler(FORMAT)
def handle(
    *,
    llama: Llama,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    tool_choice: Any = None,
    stream: bool = False,
    max_tokens: int | None = None,
    temperature: float = 0.0,
    seed: int | None = None,
    **_: Any,
) -> Any:
    offered = offered_tools(tools)
    prompt, stop = _prompt(llama, conversation(messages, offered))
    names = [tool.name for tool in offered]
    may_answer, callable_names = allowed(tool_choice, names)
    chosen = None
    if callable_names:
        grammar = LlamaGrammar.from_string(
            choice_grammar(callable_names, may_answer=may_answer, may_call=True), verbose=False
        )
        decision = _complete(llama, prompt, CHOICE_TOKENS, temperature, seed, grammar=grammar)
        chosen = parse_choice(decision, callable_names)
    if chosen is None:
        text = _complete(llama, prompt, max_tokens or ANSWER_TOKENS, temperature, seed, stop=stop).strip()
        message: dict[str, Any] = {"role": "assistant", "content": text}
        finish = "stop"
    else:
        schema = next(tool.parameters for tool in offered if tool.name == chosen)
        arguments = _complete(llama, prompt + CALL.format(name=chosen) + ARGUMENTS, ARGUMENT_TOKENS, temperature,
                              seed, grammar=_schema_grammar(schema))
        call = {"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                "function": {"name": chosen, "arguments": _json_or_empty(arguments)}}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    completion = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
        "model": llama.model_path,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": {"prompt_tokens": len(llama.tokenize(prompt.encode(), special=True)), "completion_tokens": 0,
                  "total_tokens": 0},
    }
    return _chunks(completion) if stream else completion


def _prompt(llama: Llama, messages: list[dict[str, str]]) -> tuple[str, list[str]]:
    template, turn_stops = llama.metadata.get("tokenizer.chat_template"), []
    if not template:
        if llama.metadata.get("general.architecture", "").startswith("gemma"):
            # A base model runs on past its answer: one line is the answer.
            template, turn_stops = GEMMA_TURNS, ["<end_of_turn>", "<start_of_turn>", "\n"]
        else:
            template, turn_stops = PLAIN_TURNS, ["\nUser:", "\nSystem:"]
    eos, bos = llama.token_eos(), llama.token_bos()
    formatter = Jinja2ChatFormatter(
        template=template,
        eos_token=llama._model.token_get_text(eos) if eos != -1 else "",
        bos_token=llama._model.token_get_text(bos) if bos != -1 else "",
    )
    rendered = formatter(messages=messages)
    stops = rendered.stop if isinstance(rendered.stop, list) else [rendered.stop] if rendered.stop else []
    prompt = rendered.prompt + "\n" if template is GEMMA_TURNS else rendered.prompt
    return prompt, [*stops, *turn_stops]


def _complete(llama: Llama, prompt: str, max_tokens: int, temperature: float, seed: int | None,
              grammar: LlamaGrammar | None = None, stop: list[str] | None = None) -> str:
    result = llama.create_completion(prompt, max_tokens=max_tokens, temperature=temperature, seed=seed,
                                     grammar=grammar, stop=stop or [])
    return result["choices"][0]["text"]  # type: ignore[index]


def _schema_grammar(schema: dict[str, Any]) -> LlamaGrammar:
    try:
        return LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    except Exception:  # boundary: a schema llama.cpp cannot turn into a grammar ("raw" config) gets any object
        return LlamaGrammar.from_json_schema(json.dumps(ANY_OBJECT), verbose=False)


def _json_or_empty(text: str) -> str:
    try:
        return json.dumps(json.loads(text))
    except ValueError:
        return "{}"  # cut off at the token limit: toolbridge answers it with invalid_arguments


def _chunks(completion: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The whole answer as an OpenAI stream: role, content or the call, then the finish."""
    choice = completion["choices"][0]
    message = choice["message"]
    base = {key: completion[key] for key in ("id", "created", "model")} | {"object": "chat.completion.chunk"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return base | {"choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    if message.get("tool_calls"):
        yield chunk({"tool_calls": [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]})
    elif message.get("content"):
        yield chunk({"content": message["content"]})
    yield chunk({}, choice["finish_reason"]) | {"usage": completion["usage"]}  # as include_usage asks

