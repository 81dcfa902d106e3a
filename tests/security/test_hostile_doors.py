"""The three new doors (Responses, Messages, Ollama) under crafted input: every field each translator reads, given
every wrong type, is a 400 in the door's shape and never a 500 (a table of values at every place of a full
request, the fuzz the suite has no hypothesis for); nesting past what the writers write; a previous_response_id
chain bounded by what one request may carry; and through a real gateway, what reaches the upstream and the client.
Figures for the big inputs (many items, images, a long chain): bench/hostile_doors.py."""

import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import orjson
import pytest
from pydantic import ValidationError

from app.api.chat_body import parse_json
from app.doors.messages.request import chat_body as messages_body
from app.doors.ollama.request import chat_body as ollama_body
from app.doors.responses.answer import ResponseWriter
from app.doors.responses.request import read_request
from app.doors.responses.store import StoredResponses
from app.openai.errors import InvalidRequest
from app.openai.schemas import ChatCompletionRequest
from app.state import MemoryStore
from app.state.store import Bounds
from app.upstream.client import _json_bytes
from tests.conftest import Gateway, running_gateway, stdio_entry, wait_for_health
from tests.support.fake_upstream import Call, FakeUpstream, Turn


def _deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


# Every wrong type at every place: a number where a list is, null, objects where strings are, an integer past 64
# bits, a lone surrogate (Python's parser reads it), empty and odd lists, objects with a non-string `type`.
HOSTILE: list[Any] = [
    None, 0, -1, 2**70, 1.5, True, "", "x", "\ud800", [], [1], [None], [[]], {}, {"a": 1}, {"type": []},
    {"type": {}}, {"type": "text", "text": []}, _deep(200), ["\ud800"], [{}], [{"type": None}],
]
PNG_BASE64 = "iVBORw0KGgo="
RESPONSES = {
    "model": "m", "instructions": "be", "store": True, "stream": False, "previous_response_id": "resp_x",
    "input": [
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "hi"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{PNG_BASE64}", "detail": "low"}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "r"}]}],
    "tools": [{"type": "function", "name": "f", "description": "d", "parameters": {"type": "object"}, "strict": True}],
    "tool_choice": {"type": "function", "name": "f"}, "text": {"format": {"type": "json_schema", "name": "n",
                                                                          "schema": {}}},
    "reasoning": {"effort": "low", "summary": "auto"}, "metadata": {"a": "b"}, "user": "u", "max_output_tokens": 5,
    "temperature": 1, "top_p": 1, "parallel_tool_calls": True, "truncation": "auto", "include": [],
}
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_BASE64}}
MESSAGES = {
    "model": "m", "max_tokens": 10, "system": [{"type": "text", "text": "s"}], "stream": False, "temperature": 1,
    "top_p": 1, "stop_sequences": ["x"], "metadata": {"user_id": "x"},
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi"}, IMAGE,
                                     {"type": "image", "source": {"type": "url", "url": "http://x"}}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}, {"type": "text", "text": "a"},
                                          {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": True,
                                      "content": [{"type": "text", "text": "r"}, IMAGE]}]}],
    "tools": [{"name": "f", "description": "d", "input_schema": {"type": "object"}, "strict": True}],
    "tool_choice": {"type": "tool", "name": "f", "disable_parallel_tool_use": True},
    "thinking": {"type": "enabled", "budget_tokens": 5000}, "output_config": {"effort": "low"},
}
OLLAMA = {
    "model": "m", "stream": False, "think": "low", "format": {"type": "object"},
    "options": {"temperature": 1, "top_p": 1, "seed": 1, "stop": ["x"], "num_predict": 5},
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": "hi", "images": [PNG_BASE64]},
        {"role": "assistant", "content": "", "thinking": "t",
         "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"a": 1}}}]},
        {"role": "tool", "content": "r", "tool_name": "f", "tool_call_id": "c"}],
}


def _responses(body: dict[str, Any]) -> dict[str, Any]:
    """The Responses door's chat body, and its response written once (the echo is the door's own output)."""
    request = read_request(body)
    orjson.dumps(ResponseWriter("m", request.echo).response)
    return {**request.chat_body, "messages": request.chat_messages([])}


DOORS: dict[str, tuple[dict[str, Any], Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "responses": (RESPONSES, _responses), "messages": (MESSAGES, messages_body), "ollama": (OLLAMA, ollama_body),
}


def _places(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield from _places(child, (*path, key))


def _variants(base: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The base request with one place changed: each hostile value there, or the place left out."""
    for path in _places(base):
        if not path:
            continue
        for value in [*HOSTILE, KeyError]:
            body = copy.deepcopy(base)
            parent = body
            for key in path[:-1]:
                parent = parent[key]
            if value is KeyError:
                del parent[path[-1]]
            else:
                parent[path[-1]] = copy.deepcopy(value)
            yield f"{'.'.join(map(str, path))}={'(left out)' if value is KeyError else repr(value)[:30]}", body


def _outcome(translate: Callable[[dict[str, Any]], dict[str, Any]], body: Any) -> str:
    """What the gateway makes of a body: "400" (refused, naming what), or "sent" (the body the upstream gets)."""
    try:
        chat = translate(body)
        ChatCompletionRequest.model_validate(chat)
        _json_bytes(chat)
    except InvalidRequest as refused:
        refused.message.encode()  # the error body can be written (a refusal may quote the client's text)
        return "400"
    except ValidationError:
        return "400"
    return "sent"


@pytest.mark.parametrize("door", DOORS)
def test_no_wrong_type_anywhere_makes_a_door_crash(door: str) -> None:
    """On the doors as merged: a list or an object as an item's `type`, `role`, `tool_choice.type` or
    `output_config.effort` was a TypeError (unhashable) and a 500; an integer past 64 bits or a lone surrogate
    in an echoed field (Responses' `reasoning.summary`, `truncation`, `metadata`) or in Ollama's tool call
    arguments failed orjson's writing after the work, a 500 (or a stream that broke off)."""
    base, translate = DOORS[door]
    assert _outcome(translate, copy.deepcopy(base)) == "sent"  # the base request itself is served
    crashes = []
    cases = 0
    for name, body in _variants(base):
        cases += 1
        try:
            _outcome(translate, body)
        except Exception as exc:  # the boundary the table checks: anything but a 400 is a 500 at the route
            crashes.append(f"{name}: {type(exc).__name__}: {exc}")
    assert cases > 900
    assert crashes == []


def _nested(levels: int) -> str:
    return '{"a":' * levels + "1" + "}" * levels


NESTED = {
    "responses tool parameters": ('{"model":"m","input":"hi","tools":[{"type":"function","name":"f",'
                                  '"parameters":%s}]}', _responses),
    "responses metadata": ('{"model":"m","input":"hi","metadata":%s}', _responses),
    "messages tool_use input": ('{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":'
                                '"tool_use","id":"t","name":"f","input":%s}]}]}', messages_body),
    "messages tool schema": ('{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":'
                             '[{"name":"f","input_schema":%s}]}', messages_body),
    "ollama arguments": ('{"model":"m","messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f",'
                         '"arguments":%s}}]}]}', ollama_body),
    "ollama format": ('{"model":"m","messages":[{"role":"user","content":"x"}],"format":%s}', ollama_body),
}


@pytest.mark.parametrize("levels", [300, 1015])
@pytest.mark.parametrize("place", NESTED)
def test_nesting_past_what_the_writers_write_is_served_or_a_400(place: str, levels: int) -> None:
    """orjson reads 1,024 levels but writes 255, and the standard library writes about 1,000: a schema or
    arguments nested between were a 500 (orjson's "Recursion limit reached" in the Responses echo and Ollama's
    arguments, a RecursionError where the body is sent upstream)."""
    template, translate = NESTED[place]
    body = parse_json((template % _nested(levels)).encode(), "application/json")
    assert _outcome(translate, body) in ("400", "sent")


@pytest.mark.anyio
async def test_a_previous_response_chain_is_read_only_up_to_what_one_request_may_carry() -> None:
    """The chain's turns were read whole (up to 1,000 of 4 MB each, the whole store on a keyless gateway) and
    decoded on the event loop; now the read stops at the body limit and says so."""
    stored = StoredResponses(MemoryStore(Bounds(max_bytes=10_000_000, max_age_seconds=60)), "")
    chain: list[str] = []
    for turn in range(5):
        response = {"id": f"resp_{turn}"}
        await stored.keep(response, list(chain), [{"role": "user", "content": "x" * 1000}])
        chain.append(response["id"])
    ids, messages = await stored.conversation("resp_4", max_bytes=10_000)
    assert ids == chain and len(messages) == 5
    with pytest.raises(InvalidRequest) as refused:
        await stored.conversation("resp_4", max_bytes=3_000)
    assert refused.value.param == "previous_response_id" and "3,000 bytes" in refused.value.message


# Through a real gateway: the crafted bodies the table found, each door's shape, and what crosses the gateway.

KEY = "sk-hostile-CANARY"
UPSTREAM_KEY = "sk-upstream-CANARY"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, FakeUpstream]]:
    from tests.support.servers import ServerThread

    upstream = FakeUpstream()
    directory = tmp_path_factory.mktemp("hostile-doors")
    servers = {"basic": stdio_entry("basic.py"), "leaky": stdio_entry("leaky.py", str(directory / "down"))}
    with (ServerThread(upstream.app) as thread,
          running_gateway(directory, servers, ready=("basic", "leaky"), key=KEY, api_keys=KEY,
                          upstream_url=f"{thread.url}/v1", upstream_api_key=UPSTREAM_KEY) as gateway):
        yield gateway, upstream


def _error_message(door: str, answer: httpx.Response) -> str:
    body = answer.json()
    if door == "messages":
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error", body
        return str(body["error"]["message"])
    if door == "ollama":
        assert isinstance(body["error"], str), body
        return body["error"]
    assert isinstance(body["error"]["message"], str), body
    return str(body["error"]["message"])


CRAFTED = [
    ("responses", b'{"model":"m","input":[{"type":[],"role":"user","content":"hi"}]}', "input[0].type"),
    ("responses", b'{"model":"m","input":[{"role":{"a":1},"content":"hi"}]}', "input[0].role"),
    ("responses", b'{"model":"m","input":[{"role":"user","content":[{"type":["input_text"],"text":"hi"}]}]}',
     "input[0].content[0].type"),
    ("responses", b'{"model":"m","input":"hi","stream":true,"reasoning":{"summary":"\\ud800"}}', "reasoning"),
    ("responses", b'{"model":"m","input":"hi","truncation":' + b"9" * 30 + b"}", "truncation"),
    ("messages", b'{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],'
                 b'"tool_choice":{"type":["auto"]}}', "tool_choice"),
    ("messages", b'{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],'
                 b'"output_config":{"effort":{"a":1}}}', "output_config.effort"),
    ("ollama", b'{"model":"m","messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":'
               b'{"a":"\\ud800"}}}]},{"role":"user","content":"hi"}]}', "Unicode"),
    # A refusal that quotes the client's lone surrogate: the error body could not be encoded (a 500 whose
    # logging failed too, 6 to 11 s each with the event loop held, on the doors as merged).
    ("messages", b'{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"\\ud800"}]}]}',
     "'\\ud800' blocks"),
    ("messages", b'{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f",'
                 b'"input_schema":{},"type":"web_search\\udfff"}]}', "web_search\\udfff"),
]
PATHS = {"responses": "/v1/responses", "messages": "/v1/messages", "ollama": "/api/chat",
         "chat": "/v1/chat/completions"}


@pytest.mark.parametrize(("door", "body", "named"), CRAFTED, ids=[f"{c[0]}-{c[2]}" for c in CRAFTED])
def test_crafted_bodies_are_400s_in_the_doors_shape(
    keyed: tuple[Gateway, FakeUpstream], door: str, body: bytes, named: str
) -> None:
    gateway, upstream = keyed
    upstream.script()
    answer = httpx.post(f"{gateway.url}{PATHS[door]}", content=body, timeout=30,
                        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    assert answer.status_code == 400, answer.text
    assert named in _error_message(door, answer)
    assert upstream.requests == []


def test_a_model_name_with_a_lone_surrogate_is_not_found(keyed: tuple[Gateway, FakeUpstream]) -> None:
    gateway, _ = keyed
    answer = httpx.post(f"{gateway.url}/api/show", content=b'{"model":"m\\ud800"}', timeout=30,
                        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    assert answer.status_code == 404 and answer.json() == {"error": "model 'm\\ud800' not found"}


def test_an_integer_past_64_bits_in_ollama_arguments_is_sent_on(keyed: tuple[Gateway, FakeUpstream]) -> None:
    """JSON carries it, and the chat door sends it on: so does Ollama's (it was a 500)."""
    gateway, upstream = keyed
    upstream.script(Turn(content="fine"))
    body = {"model": "m", "stream": False, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"n": 2**70}}}]},
        {"role": "tool", "content": "done", "tool_name": "f"}, {"role": "user", "content": "and?"}]}
    answer = httpx.post(f"{gateway.url}/api/chat", content=json.dumps(body), timeout=30,
                        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    assert answer.status_code == 200, answer.text
    sent = upstream.chat_requests()[-1]["messages"]
    calls = [call for message in sent for call in message.get("tool_calls") or []]
    assert [json.loads(call["function"]["arguments"]) for call in calls] == [{"n": 2**70}], sent


REQUESTS = {
    "responses": {"model": "m", "input": "Ping, please.", "store": False},
    "messages": {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "Ping, please."}]},
    "ollama": {"model": "m", "stream": False, "messages": [{"role": "user", "content": "Ping, please."}]},
    "chat": {"model": "m", "messages": [{"role": "user", "content": "Ping, please."}]},  # for comparison
}
CLIENT_HEADERS = {
    "x-api-key": KEY, "anthropic-version": "2023-06-01", "anthropic-beta": "CANARY-beta",
    "cookie": "session=COOKIE-CANARY", "x-stainless-os": "CANARY-os",
}


def test_no_client_header_and_no_operator_text_crosses_the_gateway(keyed: tuple[Gateway, FakeUpstream]) -> None:
    """The upstream gets the gateway's own headers (its key), none of the client's: not the gateway key in
    x-api-key, Anthropic's headers, cookies. The client gets the call's failure in the gateway's words, never
    what the server wrote to stderr for its operator (leaky.py prints a password when it cannot start)."""
    gateway, upstream = keyed
    upstream.script(Turn(calls=[Call("leaky__note", {"text": "USER-PRIVATE"})]), Turn(content="saved"))
    first = httpx.post(f"{gateway.url}/v1/responses", json=REQUESTS["responses"], headers=CLIENT_HEADERS, timeout=30)
    assert first.status_code == 200, first.text
    wait_for_health(gateway.url, lambda b: b["servers"]["leaky"]["state"] == "failed", key=KEY)
    for door, request in REQUESTS.items():
        upstream.script(Turn(calls=[Call("leaky__ping", {})]), Turn(content="it is down"))
        answer = httpx.post(f"{gateway.url}{PATHS[door]}", json=request, headers=CLIENT_HEADERS, timeout=30)
        assert answer.status_code == 200, answer.text
        assert "it is down" in answer.text and "server_unavailable" in json.dumps(upstream.chat_requests()[-1])
        for secret in ("OPERATOR-SECRET", "DB_PASSWORD", "USER-PRIVATE", KEY, UPSTREAM_KEY):
            assert secret not in answer.text, door
        sent = json.dumps(upstream.headers)
        for canary in (KEY, "CANARY-beta", "COOKIE-CANARY", "CANARY-os", "anthropic"):
            assert canary not in sent, door
        assert all(headers.get("authorization") == f"Bearer {UPSTREAM_KEY}" for headers in upstream.headers)
    assert "OPERATOR-SECRET" in httpx.get(f"{gateway.url}/health", headers={"x-api-key": KEY}).text  # the operator's


REFUSED_KEY = f"Incorrect API key provided: {UPSTREAM_KEY}."
UPSTREAM_FAILURES = {
    "status": Turn(status=401, error=REFUSED_KEY),
    "mid-stream": Turn(raw=[{"choices": [{"index": 0, "delta": {"content": "Hel"}}]}, {"error": REFUSED_KEY}]),
}


@pytest.mark.parametrize("failure", UPSTREAM_FAILURES)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("door", REQUESTS)
def test_an_upstream_error_quoting_the_upstream_key_does_not_show_it(
    keyed: tuple[Gateway, FakeUpstream], door: str, stream: bool, failure: str
) -> None:
    """Some servers quote the key they refused ("Incorrect API key provided: sk-..."): the door's error passes
    the upstream's words on (as a status, or as an error event once the answer began), without the gateway's
    upstream key. On the doors as merged, every door (and the chat door) showed the key."""
    gateway, upstream = keyed
    upstream.script(UPSTREAM_FAILURES[failure])
    answer = httpx.post(f"{gateway.url}{PATHS[door]}", json={**REQUESTS[door], "stream": stream},
                        headers={"x-api-key": KEY}, timeout=30)
    assert "Incorrect API key provided" in answer.text
    assert UPSTREAM_KEY not in answer.text
