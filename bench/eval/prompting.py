"""The pure half of the eval's chat handler: how a tool conversation is shown to a small model, the grammar
of its one decision ("answer" or "call TOOL"), and reading that decision back. No llama.cpp here, so CI
tests it; `handler.py` feeds it to the model.

Honesty rule: nothing here reads the user's words to pick a tool. The grammar only limits the model to
well-formed choices; which one is the model's.
"""

import json
from dataclasses import dataclass
from typing import Any

from app.openai.schemas import content_text

ANSWER_TOKENS = 128  # the facts come first; a 135M model rambles on
ANSWER = "I will answer directly."
CALL = "I will call {name}."
ARGUMENTS = " Arguments: "


@dataclass(frozen=True)
class OfferedTool:
    name: str
    description: str
    parameters: dict[str, Any]


def offered_tools(tools: list[dict[str, Any]] | None) -> list[OfferedTool]:
    """The OpenAI `tools` of a request, in their order."""
    found = []
    for tool in tools or []:
        function = tool.get("function") or {}
        if isinstance(function.get("name"), str):
            found.append(OfferedTool(function["name"], str(function.get("description") or ""),
                                     function.get("parameters") or {"type": "object", "properties": {}}))
    return found


def tools_text(tools: list[OfferedTool]) -> str:
    lines = ["You can call these tools. Call one when it helps; otherwise answer."]
    for tool in tools:
        properties = (tool.parameters.get("properties") or {}) if isinstance(tool.parameters, dict) else {}
        arguments = ", ".join(properties) or "no arguments"
        lines.append(f"- {tool.name}({arguments}): {tool.description.strip()}")
    return "\n".join(lines)


def conversation(messages: list[dict[str, Any]], tools: list[OfferedTool]) -> list[dict[str, str]]:
    """The messages as system/user/assistant text only (small models' templates know no `tool` role):
    calls become the words the model writes when it calls, results become a user turn that names the tool."""
    names = {}
    shown: list[dict[str, str]] = []
    for message in messages:
        role, content = message.get("role"), content_text(message.get("content"))
        if role in ("system", "developer"):
            shown.append({"role": "system", "content": content})
        elif role == "assistant" and message.get("tool_calls"):
            parts = [content] if content else []
            for call in message["tool_calls"]:
                function = call.get("function") or {}
                name = names[call.get("id")] = function.get("name", "")
                parts.append(CALL.format(name=name) + ARGUMENTS + (function.get("arguments") or "{}"))
            shown.append({"role": "assistant", "content": "\n".join(parts)})
        elif role == "tool":
            shown.append({"role": "user", "content": f"Result of {names.get(message.get('tool_call_id'), 'the tool')}: "
                                                       f"{content}"})
        elif role in ("user", "assistant"):
            shown.append({"role": role, "content": content})
    if tools:
        listing = tools_text(tools)
        if shown and shown[0]["role"] == "system":
            shown[0] = {"role": "system", "content": f"{shown[0]['content']}\n\n{listing}"}
        else:
            shown.insert(0, {"role": "system", "content": listing})
    return _merge_same_roles(shown)


def choice_grammar(names: list[str], *, may_answer: bool, may_call: bool) -> str:
    """GBNF for the one decision: answer, or call one of `names`."""
    options = []
    if may_answer:
        options.append(_literal(ANSWER))
    if may_call and names:
        alternatives = " | ".join(_literal(name) for name in names)
        options.append(f'{_literal("I will call ")} ({alternatives}) {_literal(".")}')
    if not options:
        raise ValueError("neither answering nor calling is allowed")
    return "root ::= " + " | ".join(options)


def parse_choice(text: str, names: list[str]) -> str | None:
    """The tool the model chose, or None for an answer."""
    for name in sorted(names, key=len, reverse=True):
        if text.strip() == CALL.format(name=name):
            return name
    return None


def allowed(tool_choice: Any, names: list[str]) -> tuple[bool, list[str]]:
    """(may answer, tools it may call) for an OpenAI `tool_choice`."""
    if tool_choice == "none" or not names:
        return True, []
    if tool_choice == "required":
        return False, names
    if isinstance(tool_choice, dict):
        forced = (tool_choice.get("function") or {}).get("name")
        return False, [forced] if forced in names else names
    return True, names


def _literal(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid GBNF string literal


def _merge_same_roles(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    # Templates such as Gemma's require turns to alternate.
    merged: list[dict[str, str]] = []
    for message in messages:
        if merged and merged[-1]["role"] == message["role"]:
            merged[-1] = {"role": message["role"], "content": f"{merged[-1]['content']}\n\n{message['content']}"}
        else:
            merged.append(message)
    return merged
