"""What a stable tool order saves on CPU: the time to first token of a follow-up turn when the model server can
reuse the prompt it processed last time (LM Studio, llama.cpp and llama-cpp-python keep the last prompt's KV cache
and process only what differs after the longest shared start), against the same turn when its tools come in
another order, so that everything from the tools on is processed again.

    .venv/bin/python -m bench.prompt_cache [--model PATH.gguf] [--threads 2]

It needs the eval's extras (llama-cpp-python and SmolLM2, see docs/eval.md). The tools are the ones the budget
keeps for an 8k context (of the 155 of bench/eval/catalogue/) for the follow-up tasks of the eval at scale, rendered as
JSON in the system message as chat templates do. It also counts, over those tasks, how often the second turn's
tool list is the first turn's, in the same order, under each TOOLBRIDGE_TOOL_ORDER: only then can the cache help.
"""

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from mcp.types import Tool

from app.chat.offer.tool_budget import budget_for, choose_in_conversation, choose_within
from app.mcp.convert import ConversionOptions, build_catalogue
from app.openai.wire import Message
from bench.eval.__main__ import _model_file as model_file
from bench.eval.tasks import Task, load_tasks

CATALOGUE = Path(__file__).parent / "eval" / "catalogue"
ANSWER = "Here is what I found."
CONTEXT = 8192  # tokens, as LM Studio loads a model, and as the budget sizes the tools for it


def catalogue() -> tuple[list[dict[str, Any]], dict[str, str]]:
    listed = [json.loads(path.read_text()) for path in sorted(CATALOGUE.glob("*.json")) if path.stem != "results"]
    built = build_catalogue({entry["server"]: [Tool.model_validate(t) for t in entry["tools"]] for entry in listed},
                            ConversionOptions(prefix="on-conflict"))
    return list(built.openai_tools), {name: route.server for name, route in built.routes.items()}


def offered(tools: list[dict[str, Any]], servers: dict[str, str], turns: list[str], relevance: bool,
            conversation: bool = True) -> list[str]:
    """The names a request of these user turns is offered, in the order it is offered them: as the gateway chooses
    them (`conversation`: a follow-up on the same subject keeps the request before's), or by its words alone."""
    messages: list[Message] = []
    for index, turn in enumerate(turns):
        messages += [{"role": "assistant", "content": ANSWER}] if index else []
        messages.append({"role": "user", "content": turn})
    budget = budget_for(24, CONTEXT, False, 4, relevance_order=relevance)
    choose = choose_in_conversation if conversation else choose_within
    choice = choose(tools, [], messages, budget, servers=servers)
    if choice is None:  # everything fits: all of them, as configured
        return [t["function"]["name"] for t in tools]
    return list(choice.order) or [t["function"]["name"] for t in tools if t["function"]["name"] in choice.kept]


def prompt(tools: dict[str, dict[str, Any]], names: list[str], turns: list[str]) -> str:
    """A ChatML prompt with the tools as JSON in the system message, as chat templates render them."""
    system = "You can call these tools:\n" + "\n".join(json.dumps(tools[name]) for name in names)
    parts = [f"<|im_start|>system\n{system}<|im_end|>"]
    for index, turn in enumerate(turns):
        parts.append(f"<|im_start|>user\n{turn}<|im_end|>")
        parts.append(f"<|im_start|>assistant\n{ANSWER if index < len(turns) - 1 else ''}")
        if index < len(turns) - 1:
            parts[-1] += "<|im_end|>"
    return "\n".join(parts)


def first_token_seconds(model: Any, text: str) -> float:
    started = time.perf_counter()
    model.create_completion(text, max_tokens=1, temperature=0)
    return time.perf_counter() - started


def follow_ups() -> list[Task]:
    return [task for task in load_tasks() if task.servers == "catalogue" and len(task.turns) > 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a GGUF file (default: the eval's SmolLM2-135M)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--follow-ups", type=int, default=9, help="how many of the follow-up tasks to time")
    args = parser.parse_args()
    tools, servers = catalogue()
    by_name = {tool["function"]["name"]: tool for tool in tools}
    tasks = follow_ups()
    for relevance in (False, True):
        for conversation in (False, True):
            same = sum(offered(tools, servers, t.turns[:1], relevance)
                       == offered(tools, servers, t.turns[:2], relevance, conversation) for t in tasks)
            print(f"TOOL_ORDER={'relevance' if relevance else 'configured'}: the second turn's tools are the first's, "
                  f"in its order, in {same} of {len(tasks)} follow-ups"
                  f" ({'as the gateway offers them' if conversation else 'chosen by its words alone'})")

    from llama_cpp import Llama  # the eval's extra

    path = args.model or model_file("smollm2")[0]
    model = Llama(path, n_ctx=CONTEXT, n_threads=args.threads, n_threads_batch=args.threads, verbose=False)
    warm, cold, tokens = [], [], []
    for task in tasks[: args.follow_ups]:
        first = offered(tools, servers, task.turns[:1], False)
        turns = task.turns[:2]
        shuffled = first[1:] + first[:1]  # the same tools, another order: what relevance does between turns
        first_token_seconds(model, prompt(by_name, first, turns[:1]))  # the first turn: its prompt is now cached
        warm.append(first_token_seconds(model, prompt(by_name, first, turns)))
        first_token_seconds(model, prompt(by_name, first, turns[:1]))
        cold.append(first_token_seconds(model, prompt(by_name, shuffled, turns)))
        tokens.append(len(model.tokenize(prompt(by_name, first, turns).encode())))
    print(f"{Path(path).name}, {args.threads} threads, {len(warm)} follow-ups, median prompt "
          f"{statistics.median(tokens):.0f} tokens:")
    print(f"  second turn, tools in the first turn's order (cache reused): first token in "
          f"{statistics.median(warm):.2f} s median")
    print(f"  second turn, the same tools in another order (processed again): first token in "
          f"{statistics.median(cold):.2f} s median")
    mounted(model, tools, servers, tasks[: args.follow_ups])


def mounted(model: Any, tools: list[dict[str, Any]], servers: dict[str, str], tasks: list[Task]) -> None:
    """Issue 47's figure: the first token with the twelve servers mounted (the tools the gateway offers at an 8k
    context) against mcp-server-time alone, for a conversation's first turn (the model server's cache holds another
    conversation) and its follow-up (the cache holds the first turn)."""
    by_name = {tool["function"]["name"]: tool for tool in tools}
    time_only = [name for name, server in servers.items() if server == "time"]
    figures: dict[str, tuple[list[float], list[float]]] = {}
    for arm in ("155 tools", "mcp-server-time"):
        firsts, follow_ups_ = figures.setdefault(arm, ([], []))
        for index, task in enumerate(tasks):
            turns = task.turns[:2]
            names = [offered(tools, servers, turns[:n], False) if arm == "155 tools" else time_only for n in (1, 2)]
            other = tasks[index - 1].turns[:1]  # what the cache held: another conversation's first turn
            first_token_seconds(model, prompt(by_name, offered(tools, servers, other, False)
                                              if arm == "155 tools" else time_only, other))
            firsts.append(first_token_seconds(model, prompt(by_name, names[0], turns[:1])))
            follow_ups_.append(first_token_seconds(model, prompt(by_name, names[1], turns)))
    print("The first token, median over the follow-up tasks (the tools the gateway offers at an 8k context):")
    for arm, (firsts, later) in figures.items():
        print(f"  {arm:>16}: first turn {statistics.median(firsts):.2f} s, follow-up {statistics.median(later):.2f} s")
    kept = [offered(tools, servers, task.turns[:1], False) == offered(tools, servers, task.turns[:2], False)
            for task in tasks]
    for keeps, words in ((True, "keep the first turn's tools"), (False, "are offered others")):
        times = [seconds for seconds, same in zip(figures["155 tools"][1], kept, strict=True) if same == keeps]
        if times:
            print(f"  155 tools, the {len(times)} follow-ups that {words}: {statistics.median(times):.2f} s median")
    (ours_first, ours_later), (time_first, time_later) = figures["155 tools"], figures["mcp-server-time"]
    first_x = statistics.median(ours_first) / statistics.median(time_first)
    print(f"  155 tools / mcp-server-time: first turn {first_x:.1f}x,"
          f" follow-up {statistics.median(ours_later) / statistics.median(time_later):.1f}x")


if __name__ == "__main__":
    main()
