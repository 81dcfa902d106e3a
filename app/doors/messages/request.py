"""An Anthropic Messages request made a chat completion's body for the chat service: the model, the conversation
(messages_content.py), max_tokens, sampling, the client's tools and tool choice, thinking as a reasoning effort.
What the chat API cannot say is a 400 naming the field, never a half-translated request sent upstream; only
hints for Anthropic's own service, which change nothing a local model answers, are left out."""

from typing import Literal

from app.doors.body import DoorBody, DoorOptions, FunctionSent, ToolSent
from app.doors.messages.content import chat_messages, invalid
from app.openai.wire import JSONObject, JSONValue

# Anthropic's service's own knobs: caching, billing, routing, attribution, server-side context editing, top_k
# (which the chat API has no word for). Left out: a local model answers the same without them.
IGNORED = frozenset({
    "metadata", "top_k", "service_tier", "cache_control", "inference_geo", "speed", "diagnostics",
    "context_management", "user_profile_id", "workspace_id",
})
REFUSED = {
    "container": "containers are Anthropic's code execution sandboxes, which toolbridge cannot serve",
    "mcp_servers": "Anthropic's MCP connector is not served by toolbridge; the MCP servers of toolbridge's "
                   "mcp.json are offered to the model already",
}
TRANSLATED = frozenset({
    "model", "max_tokens", "messages", "system", "stream", "temperature", "top_p", "stop_sequences", "tools",
    "tool_choice", "thinking", "output_config",
})
CHOICES = {"auto": "auto", "any": "required", "none": "none"}
CUSTOM_TOOL = "custom"  # a client's own tool may say its type; every other type is one of Anthropic's server tools
# Anthropic's effort words, and what a chat API's reasoning_effort says of each.
EFFORTS = {"low": "low", "medium": "medium", "high": "high", "xhigh": "high", "max": "high"}
# A thinking budget read as an effort: Claude Code's "think" (4,000 tokens) is low, "think hard" (10,000) medium,
# "ultrathink" (31,999) high.
LOW_BUDGET, MEDIUM_BUDGET = 4_096, 16_384


def chat_body(body: JSONObject) -> DoorBody:
    """The chat completion's body for this Messages request.

    Raises:
        InvalidRequest: a field the chat API cannot say, or one that is not as Anthropic's API takes it.
    """
    _check_fields(body)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise invalid("model", "Field required" if model is None else "must be a string")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise invalid("stream", "must be a boolean")
    chat: DoorBody = {"model": model, "messages": chat_messages(body.get("system"), body.get("messages")),
                      "max_tokens": _max_tokens(body.get("max_tokens")), "stream": stream}
    chat = {**chat, **_sampling(body)}
    if "tools" in body:
        chat["tools"] = _tools(body["tools"])
    chat = {**chat, **_tool_choice(body.get("tool_choice"))}
    if effort := _effort(body.get("thinking"), body.get("output_config")):
        chat["reasoning_effort"] = effort
    return chat


def _check_fields(body: JSONObject) -> None:
    for name in body:
        if name in REFUSED:
            raise invalid(name, REFUSED[name])
        if name not in TRANSLATED and name not in IGNORED:
            raise invalid(name, "this field is not served by toolbridge's Messages API")


def _max_tokens(value: JSONValue) -> int:
    if value is None:
        raise invalid("max_tokens", "Field required")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise invalid("max_tokens", "must be a whole number of at least 1")
    return value


def _sampling(body: JSONObject) -> DoorOptions:
    """temperature and top_p as they are; stop_sequences as the chat API's `stop`."""
    chosen: DoorOptions = {}
    name: Literal["temperature", "top_p"]
    for name in ("temperature", "top_p"):
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise invalid(name, "must be a number")
        chosen[name] = value
    stops = body.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(stop, str) for stop in stops):
            raise invalid("stop_sequences", "must be a list of strings")
        if stops:
            chosen["stop"] = stops
    return chosen


def _tools(tools: JSONValue) -> list[ToolSent]:
    """The client's own tools as chat functions; a server tool (web search, bash, the text editor, the
    computer...) is refused: Anthropic runs those on its side, and a local model has no such thing."""
    if not isinstance(tools, list):
        raise invalid("tools", "must be a list of tools")
    functions: list[ToolSent] = []
    for number, tool in enumerate(tools):
        at = f"tools.{number}"
        if not isinstance(tool, dict):
            raise invalid(at, "each tool must be an object")
        kind = tool.get("type")
        if kind is not None and kind != CUSTOM_TOOL:
            raise invalid(f"{at}.type", f"'{kind}' is one of Anthropic's server tools, which run on Anthropic's "
                                        "side: toolbridge cannot serve it. Give your own tools as {name, description, "
                                        "input_schema}; toolbridge's MCP tools are offered to the model already")
        name, schema, description = tool.get("name"), tool.get("input_schema"), tool.get("description")
        if not isinstance(name, str) or not name:
            raise invalid(f"{at}.name", "Field required")
        if not isinstance(schema, dict):
            raise invalid(f"{at}.input_schema", "must be a JSON schema object")
        function: FunctionSent = {"name": name, "parameters": schema}
        if isinstance(description, str):
            function["description"] = description
        if tool.get("strict") is True:
            function["strict"] = True
        functions.append({"type": "function", "function": function})
    return functions


def _tool_choice(choice: JSONValue) -> DoorOptions:
    """`tool_choice` in the chat API's words: any is "required", a named tool a named function; and
    disable_parallel_tool_use as `parallel_tool_calls: false`."""
    if choice is None:
        return {}
    kind = choice.get("type") if isinstance(choice, dict) else None
    if not isinstance(choice, dict) or not isinstance(kind, str) or (kind not in CHOICES and kind != "tool"):
        raise invalid("tool_choice", "must be an object of type 'auto', 'any', 'tool' or 'none'")
    if kind == "tool":
        name = choice.get("name")
        if not isinstance(name, str) or not name:
            raise invalid("tool_choice.name", "Field required")
        chosen: DoorOptions = {"tool_choice": {"type": "function", "function": {"name": name}}}
    else:
        chosen = {"tool_choice": CHOICES[kind]}
    if choice.get("disable_parallel_tool_use") is True:
        chosen["parallel_tool_calls"] = False
    return chosen


def _effort(thinking: JSONValue, output: JSONValue) -> str | None:
    """How hard the model should think, as the chat API's reasoning_effort: output_config.effort, else a
    thinking budget; nothing for adaptive or disabled thinking (the model's own default)."""
    if output is not None:
        if not isinstance(output, dict):
            raise invalid("output_config", "must be an object")
        for name, value in output.items():
            if name != "effort" and value is not None:
                raise invalid(f"output_config.{name}", "not served by toolbridge's Messages API (structured "
                                                       "outputs: use /v1/chat/completions' response_format)")
        if output.get("effort") is not None:
            if not isinstance(output["effort"], str) or output["effort"] not in EFFORTS:
                raise invalid("output_config.effort", f"must be one of {', '.join(EFFORTS)}")
            return EFFORTS[output["effort"]]
    if thinking is None:
        return None
    if not isinstance(thinking, dict) or not isinstance(thinking.get("type"), str):
        raise invalid("thinking", "must be an object with a string 'type'")
    if thinking["type"] != "enabled":
        return None
    budget = thinking.get("budget_tokens")
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise invalid("thinking.budget_tokens", "Field required")
    return "low" if budget <= LOW_BUDGET else "medium" if budget <= MEDIUM_BUDGET else "high"
