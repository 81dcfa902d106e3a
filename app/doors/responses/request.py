"""A Responses API request (`POST /v1/responses`) read into what the chat service takes: a chat completion's body
(its messages are the stored conversation's, when it continues one, and `input_messages`), and what the answer
echoes back.

Every field is either translated, ignored because it changes nothing a local model does (caching, service tiers,
metadata kept for the echo), or refused with a 400 naming it: a request that asks for what the gateway cannot
do (hosted tools, background runs, server-side conversations, stored prompts) is never answered as if it had
not asked. So is a field the API does not have, as OpenAI answers it.
"""

from dataclasses import dataclass, field
from typing import Literal

import orjson

from app.doors.body import DoorOptions, FunctionSent, ToolChoice, ToolSent
from app.doors.responses.input import NAMESPACE_JOINT, input_messages
from app.doors.responses.items import SUMMARIES
from app.doors.responses.wire import Echo
from app.openai.errors import InvalidRequest
from app.openai.wire import JSONObject, JSONValue, Message

# Fields that change nothing here: the answer only echoes some of them. `client_metadata` is Codex's account of
# its session and turn (ids, sandbox mode) for OpenAI's analytics, sent with every request.
_IGNORED = frozenset({
    "metadata", "user", "safety_identifier", "prompt_cache_key", "prompt_cache_retention", "prompt_cache_options",
    "service_tier", "include", "stream_options", "truncation", "top_logprobs", "image", "access_programs",
    "client_metadata",
})
_READ = frozenset({
    "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "max_output_tokens",
    "temperature", "top_p", "text", "reasoning", "previous_response_id", "store", "stream",
})
# Fields that ask for what the gateway does not do, with why; refused when set to anything but "off".
_REFUSED = {
    "background": "background responses are not served: the gateway answers while the request is open",
    "background_options": "background responses are not served",
    "conversation": "server-side conversations are not served; continue with previous_response_id",
    "context_management": "server-side context compaction is not served",
    "prompt": "stored prompt templates are not served; send `instructions` and `input`",
    "max_tool_calls": "the gateway bounds tool rounds itself (TOOLBRIDGE_MAX_TOOL_ROUNDS)",
    "moderation": "moderation is not served",
}
_CHOICES = frozenset({"auto", "none", "required"})
# Fields passed on as the client sent them, and their names in the chat API.
_PassedOn = Literal["max_tokens", "temperature", "top_p", "parallel_tool_calls", "metadata", "user"]
_PASSED_ON: tuple[tuple[str, _PassedOn], ...] = (
    ("max_output_tokens", "max_tokens"), ("temperature", "temperature"), ("top_p", "top_p"),
    ("parallel_tool_calls", "parallel_tool_calls"), ("metadata", "metadata"), ("user", "user"))


@dataclass(frozen=True)
class ResponsesRequest:
    """A Responses request as the door uses it: the chat body without its messages, the new messages, and the
    fields the response echoes."""

    chat_body: DoorOptions  # everything but "messages"
    instructions: str | None
    input_messages: list[Message]
    previous_response_id: str | None
    store: bool
    stream: bool
    echo: Echo = field(default_factory=lambda: Echo())
    # A `namespace` tool's functions as the model knows them (`crm__lookup`): their namespace and own name.
    namespaced: dict[str, tuple[str, str]] = field(default_factory=dict)
    summary: bool = False  # `reasoning.summary` asked for one: the reasoning is written as its summary

    def chat_messages(self, history: list[Message]) -> list[Message]:
        """The conversation the model answers: the instructions first (never carried over from an earlier
        response, as in OpenAI's API), the earlier turns, then the new input.

        Raises:
            InvalidRequest: there is nothing to answer (no input, no earlier turns).
        """
        system: list[Message] = [{"role": "system", "content": self.instructions}] if self.instructions else []
        if not history and not self.input_messages:
            raise InvalidRequest("`input` has nothing for the model to answer.", param="input")
        return [*system, *history, *self.input_messages]


def read_request(body: JSONObject) -> ResponsesRequest:
    """The request, checked and translated.

    Raises:
        InvalidRequest: a field the gateway refuses or cannot translate, named in `param`.
    """
    _check_fields(body)
    chat: DoorOptions = {"model": body.get("model"), "stream": _flag(body, "stream", False)}
    tools, namespaced = _tools(body.get("tools"))
    if tools:
        chat["tools"] = tools
    if body.get("tool_choice") is not None:
        chat["tool_choice"] = _tool_choice(body["tool_choice"])
    for ours, theirs in _PASSED_ON:
        if body.get(ours) is not None:
            chat[theirs] = body[ours]
    chat = {**chat, **_text_format(body.get("text")), **_reasoning(body.get("reasoning"))}
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise InvalidRequest("`instructions` must be a string.", param="instructions")
    previous = body.get("previous_response_id")
    if previous is not None and not isinstance(previous, str):
        raise InvalidRequest("`previous_response_id` must be a string.", param="previous_response_id")
    if "input" not in body and previous is None:
        raise InvalidRequest("Missing required parameter: 'input'.", param="input", code="missing_required_parameter")
    return ResponsesRequest(chat, instructions or None, input_messages(body.get("input", [])), previous,
                            _flag(body, "store", True), chat["stream"], _echo(body), namespaced,
                            _summary(body.get("reasoning")))


def _check_fields(body: JSONObject) -> None:
    for name, value in body.items():
        if name in _REFUSED and value not in (None, False, [], {}):
            raise InvalidRequest(f"`{name}` cannot be served by this gateway: {_REFUSED[name]}.", param=name,
                                 code="unsupported_parameter")
        if name not in _READ and name not in _IGNORED and name not in _REFUSED:
            raise InvalidRequest(f"Unknown parameter: '{name}'.", param=name, code="unknown_parameter")


def _flag(body: JSONObject, name: str, default: bool) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidRequest(f"`{name}` must be true or false.", param=name)
    return value


def _tools(tools: JSONValue) -> tuple[list[ToolSent], dict[str, tuple[str, str]]]:
    """The client's function tools as chat tools, those of a `namespace` tool among them (named
    `namespace__name`: the map says whose they are); any other kind is a hosted tool the gateway does not have."""
    if tools is None:
        return [], {}
    if not isinstance(tools, list):
        raise InvalidRequest("`tools` must be a list.", param="tools")
    chat_tools: list[ToolSent] = []
    namespaced: dict[str, tuple[str, str]] = {}
    for index, tool in enumerate(tools):
        if isinstance(tool, dict) and tool.get("type") == "namespace":
            namespace = _namespace_name(tool, f"tools[{index}]")
            inner_tools = tool.get("tools")  # a list: _namespace_name checked it
            for number, inner in enumerate(inner_tools if isinstance(inner_tools, list) else []):
                function = _function(inner, f"tools[{index}].tools[{number}]")
                namespaced[f"{namespace}{NAMESPACE_JOINT}{function['name']}"] = (namespace, function["name"])
                function["name"] = f"{namespace}{NAMESPACE_JOINT}{function['name']}"
                chat_tools.append({"type": "function", "function": function})
        else:
            chat_tools.append({"type": "function", "function": _function(tool, f"tools[{index}]")})
    return chat_tools, namespaced


def _namespace_name(tool: JSONObject, where: str) -> str:
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidRequest(f"`{where}.name` must be a string.", param=f"{where}.name")
    if not isinstance(tool.get("tools"), list):
        raise InvalidRequest(f"`{where}.tools` must be a list.", param=f"{where}.tools")
    return name


def _function(tool: JSONValue, where: str) -> FunctionSent:
    """A `function` tool as the chat API's function."""
    kind = tool.get("type") if isinstance(tool, dict) else None
    if not isinstance(tool, dict) or kind != "function":
        raise InvalidRequest(
            f"Tools of type {kind!r} cannot be served by this gateway: it offers the model its MCP servers' "
            "tools (mcp.json) and the client's own `function` tools (in a `namespace` too), and runs no hosted tool.",
            param=f"{where}.type", code="unsupported_tool")
    name = tool.get("name")
    if not isinstance(name, str):
        raise InvalidRequest(f"`{where}.name` must be a string.", param=f"{where}.name")
    function: FunctionSent = {"name": name}
    key: Literal["description", "parameters", "strict"]
    for key in ("description", "parameters", "strict"):
        if tool.get(key) is not None:
            function[key] = tool[key]
    return function


def _tool_choice(choice: JSONValue) -> ToolChoice:
    if isinstance(choice, str) and choice in _CHOICES:
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function" and isinstance(name := choice.get("name"), str):
        return {"type": "function", "function": {"name": name}}
    kind = choice.get("type") if isinstance(choice, dict) else choice
    raise InvalidRequest(f"`tool_choice` {kind!r} cannot be served: use 'auto', 'none', 'required' or "
                         "{'type': 'function', 'name': ...}.", param="tool_choice", code="unsupported_tool_choice")


def _text_format(text: JSONValue) -> DoorOptions:
    """`text.format` as the chat body's `response_format` (plain text needs none)."""
    if text is None:
        return {}
    form = text.get("format") if isinstance(text, dict) else None
    if form is None or (isinstance(form, dict) and form.get("type") == "text"):
        return {}
    kind = form.get("type") if isinstance(form, dict) else None
    if kind == "json_object":
        return {"response_format": {"type": "json_object"}}
    if kind == "json_schema" and isinstance(form, dict) and isinstance(form.get("schema"), dict) and isinstance(
            form.get("name"), str):
        schema: JSONObject = {key: form[key] for key in ("name", "schema", "description", "strict")
                              if form.get(key) is not None}
        return {"response_format": {"type": "json_schema", "json_schema": schema}}
    raise InvalidRequest("`text.format` must be {'type': 'text'}, {'type': 'json_object'} or {'type': 'json_schema', "
                         "'name': ..., 'schema': {...}}.", param="text.format")


def _reasoning(reasoning: JSONValue) -> DoorOptions:
    if reasoning is None:
        return {}
    if not isinstance(reasoning, dict):
        raise InvalidRequest("`reasoning` must be an object.", param="reasoning")
    effort = reasoning.get("effort")
    return {"reasoning_effort": effort} if isinstance(effort, str) else {}


def _summary(reasoning: JSONValue) -> bool:
    """Whether the request asks for a reasoning summary (`generate_summary` is the field's old name); "none" and
    unknown values ask for none, as OpenAI's newer values would."""
    if not isinstance(reasoning, dict):
        return False
    asked = [reasoning.get(name) for name in ("summary", "generate_summary")]
    return any(isinstance(value, str) and value in SUMMARIES for value in asked)


def _echo(body: JSONObject) -> Echo:
    """What the response repeats of the request, with the API's defaults (the SDK's model requires some)."""
    reasoning = given if isinstance(given := body.get("reasoning"), dict) else {}
    text = given_text if isinstance(given_text := body.get("text"), dict) else {}
    return _repeatable({
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "metadata": body.get("metadata") or {},
        "parallel_tool_calls": body.get("parallel_tool_calls", True) is not False,
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
        "store": body.get("store") is not False,
        "temperature": body.get("temperature"),
        "text": {"format": text.get("format") or {"type": "text"}},
        "tool_choice": body.get("tool_choice") or "auto",
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p"),
        "truncation": body.get("truncation") or "disabled",
        "user": body.get("user"),
    })


def _repeatable(echo: Echo) -> Echo:
    """The echo, checked now that the response (and its stored copy) can be written with it: Python's parser
    accepts what orjson cannot write (integers past 64 bits, lone surrogates, nesting past 255 levels), and some
    echoed fields never go upstream to be refused there, so the answer's writing would fail after the work.

    Raises:
        InvalidRequest: naming the field.
    """
    for name, value in echo.items():
        try:
            orjson.dumps(value)
        except orjson.JSONEncodeError:
            raise InvalidRequest(f"`{name}` holds what JSON cannot carry back: an integer past 64 bits, text that "
                                 "is not valid Unicode (a lone surrogate), or nesting past 255 levels.",
                                 param=name) from None
    return echo
