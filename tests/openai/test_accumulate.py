"""Folding upstream chunks into a turn, with the quirks of LM Studio, Ollama and vLLM."""

import json

from app.openai.accumulate import TurnAccumulator, Usage


def chunk(delta: dict | None = None, finish: str | None = None, **extra: object) -> dict:
    return {"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}], **extra}


def fold(chunks: list[dict]) -> TurnAccumulator:
    turn = TurnAccumulator()
    for c in chunks:
        turn.add(c)
    return turn


def test_content_and_reasoning_are_split_and_collected() -> None:
    turn = TurnAccumulator()
    assert turn.add(chunk({"role": "assistant", "content": ""})).content == ""
    assert turn.add(chunk({"reasoning_content": "hmm"})).reasoning == "hmm"
    assert turn.add(chunk({"reasoning": "ollama style"})).reasoning == "ollama style"
    assert turn.add(chunk({"content": "Hel"})).content == "Hel"
    turn.add(chunk({"content": "lo"}, "stop"))
    assert turn.content == "Hello"
    assert turn.finish_reason == "stop"
    assert turn.tool_calls() == []


def test_lm_studio_fragments_merge_by_index_with_empty_names_ignored() -> None:
    turn = fold([
        chunk({"tool_calls": [{"index": 0, "id": "814890118", "type": "function",
                               "function": {"name": "get_weather", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"name": "", "arguments": '{"city"'}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "55", "function": {"name": "add", "arguments": '{"a":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"name": "", "arguments": ': "Oslo"}'}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": " 1}"}}]}),
        chunk({}, "tool_calls"),
    ])
    calls = turn.tool_calls()
    assert [(c.id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("814890118", "get_weather", {"city": "Oslo"}),
        ("55", "add", {"a": 1}),
    ]


def test_missing_and_empty_ids_are_generated() -> None:
    turn = fold([chunk({"tool_calls": [{"index": 0, "id": "", "function": {"name": "x", "arguments": "{}"}}]})])
    assert turn.tool_calls()[0].id.startswith("call_")


def test_whole_calls_in_one_chunk_and_missing_index() -> None:
    turn = fold([
        chunk({"role": "assistant", "tool_calls": [
            {"id": "a", "function": {"name": "one", "arguments": "{}"}}]}),
        chunk({"role": "assistant", "tool_calls": [
            {"id": "b", "function": {"name": "two", "arguments": {"k": 1}}}]}),
    ])
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls()] == [("a", "one", "{}"), ("b", "two", '{"k": 1}')]


def test_usage_from_a_usage_only_chunk() -> None:
    turn = fold([chunk({"content": "x"}), {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}])
    assert turn.usage == Usage(3, 2, 5)


def test_a_non_streamed_completion_folds_like_a_chunk() -> None:
    message = {"role": "assistant", "content": "hi"}
    turn = fold([{"choices": [{"index": 0, "finish_reason": "stop", "message": message}]}])
    assert turn.content == "hi"
    assert turn.finish_reason == "stop"
