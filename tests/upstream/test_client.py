"""The upstream client against respx, injected as its transport: stream decoding and failure mapping."""

import json

import httpx
import pytest
import respx

from app.openai.errors import UpstreamError, UpstreamStatusError, UpstreamTimeout, UpstreamUnreachable
from app.upstream.client import UpstreamClient

BASE = "http://upstream.test/v1"


def sse(*events: str) -> httpx.Response:
    body = "".join(f"data: {event}\n\n" for event in events)
    return httpx.Response(200, content=body.encode(), headers={"content-type": "text/event-stream"})


@pytest.fixture
def router() -> respx.MockRouter:
    return respx.MockRouter(using=None, assert_all_called=False)


async def collect(router: respx.MockRouter) -> list[dict]:
    client = UpstreamClient(BASE, api_key="sk-up", transport=httpx.MockTransport(router.handler))
    async with client, client.stream_chat({"model": "m", "messages": []}) as chunks:
        return [chunk async for batch in chunks for chunk in batch]


@pytest.mark.anyio
async def test_chunks_are_decoded_until_done(router: respx.MockRouter) -> None:
    route = router.post(f"{BASE}/chat/completions").mock(
        return_value=sse('{"choices": [{"delta": {"content": "a"}}]}', "[DONE]", '{"never": "read"}')
    )
    assert await collect(router) == [{"choices": [{"delta": {"content": "a"}}]}]
    assert route.calls.last.request.headers["authorization"] == "Bearer sk-up"


@pytest.mark.anyio
async def test_a_stream_with_a_finish_reason_but_no_done_ends_cleanly(router: respx.MockRouter) -> None:
    finished = '{"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}'
    router.post(f"{BASE}/chat/completions").mock(return_value=sse(finished))
    assert await collect(router) == [json.loads(finished)]


@pytest.mark.anyio
async def test_a_stream_with_neither_finish_reason_nor_done_is_cut_off(router: respx.MockRouter) -> None:
    router.post(f"{BASE}/chat/completions").mock(return_value=sse('{"choices": [{"delta": {"content": "Hal"}}]}'))
    with pytest.raises(UpstreamError, match="ended its stream unfinished after 3 characters of the answer"):
        await collect(router)


@pytest.mark.anyio
async def test_a_json_answer_to_a_stream_request_is_one_chunk(router: respx.MockRouter) -> None:
    router.post(f"{BASE}/chat/completions").mock(
        return_value=httpx.Response(200, json={"choices": [{"message": {"content": "whole"}}]})
    )
    assert await collect(router) == [{"choices": [{"message": {"content": "whole"}}]}]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("response", "error", "fragment"),
    [
        (sse('{"error": {"message": "out of memory"}}'), UpstreamError, "out of memory"),
        (sse("not json"), UpstreamError, "not JSON"),
        (httpx.Response(404, json={"error": {"message": "no such model"}}), UpstreamStatusError, "no such model"),
        (httpx.Response(500, text="boom"), UpstreamStatusError, "boom"),
    ],
)
async def test_failures_become_gateway_errors(
    router: respx.MockRouter, response: httpx.Response, error: type[Exception], fragment: str
) -> None:
    router.post(f"{BASE}/chat/completions").mock(return_value=response)
    with pytest.raises(error) as caught:
        await collect(router)
    assert fragment in str(caught.value)


@pytest.mark.anyio
async def test_status_errors_keep_4xx_and_turn_5xx_into_502(router: respx.MockRouter) -> None:
    router.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(429, json={"error": "slow down"}))
    with pytest.raises(UpstreamStatusError) as caught:
        await collect(router)
    assert caught.value.status_code == 429
    router.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(503, text="loading"))
    with pytest.raises(UpstreamStatusError) as caught:
        await collect(router)
    assert caught.value.status_code == 502


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("exception", "error"),
    [(httpx.ConnectError("refused"), UpstreamUnreachable), (httpx.ReadTimeout("slow"), UpstreamTimeout)],
)
async def test_transport_failures_are_named(
    router: respx.MockRouter, exception: Exception, error: type[Exception]
) -> None:
    router.post(f"{BASE}/chat/completions").mock(side_effect=exception)
    with pytest.raises(error) as caught:
        await collect(router)
    assert BASE in str(caught.value)


@pytest.mark.anyio
async def test_forward_strips_client_credentials_and_relays_the_body(router: respx.MockRouter) -> None:
    route = router.get(f"{BASE}/models").mock(return_value=httpx.Response(200, json={"data": []}))

    async def no_body():
        return
        yield b""

    async with UpstreamClient(BASE, transport=httpx.MockTransport(router.handler)) as client:
        proxied = await client.forward(
            "GET", "models", query="a=1", headers={"authorization": "Bearer client", "x-custom": "kept"},
            body=no_body(),
        )
        body = b"".join([part async for part in proxied.body])
    assert body == b'{"data":[]}'
    sent = route.calls.last.request
    assert "authorization" not in sent.headers
    assert sent.headers["x-custom"] == "kept"
    assert sent.url.query == b"a=1"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("routes", "kind"),
    [
        ({"http://upstream.test/api/v1/models": httpx.Response(200, json={"models": []})}, "lmstudio"),
        ({"http://upstream.test/api/v1/models": httpx.Response(404),
          "http://upstream.test/api/v0/models": httpx.Response(200, json={"data": []})}, "lmstudio"),
        ({"http://upstream.test/props": httpx.Response(200, json={"default_generation_settings": {}})}, "llamacpp"),
        ({}, "openai-compatible"),
    ],
)
async def test_the_upstream_kind_is_detected(router: respx.MockRouter, routes: dict, kind: str) -> None:
    for url, response in routes.items():
        router.get(url).mock(return_value=response)
    router.route().mock(return_value=httpx.Response(404))
    async with UpstreamClient(BASE, transport=httpx.MockTransport(router.handler)) as client:
        assert await client.server_kind() == kind


@pytest.mark.anyio
async def test_an_unreachable_upstream_is_reported_as_such(router: respx.MockRouter) -> None:
    router.route().mock(side_effect=httpx.ConnectError("refused"))
    async with UpstreamClient(BASE, transport=httpx.MockTransport(router.handler)) as client:
        assert await client.server_kind() == "unreachable"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("routes", "model", "vision"),
    [
        ({"api/v1/models": {"models": [{"key": "gemma", "capabilities": {"vision": True}}]}}, "gemma", True),
        ({"api/v1/models": {"models": [{"key": "qwen", "capabilities": {"vision": False}}]}}, "qwen", False),
        ({"api/v1/models": {"models": [{"key": "gemma", "loaded_instances": [{"id": "gemma:2"}],
                                        "capabilities": {"vision": True}}]}}, "gemma:2", True),
        ({"api/v0/models": {"data": [{"id": "llava", "type": "vlm"}, {"id": "qwen", "type": "llm"}]}}, "llava", True),
        ({"api/v0/models": {"data": [{"id": "llava", "type": "vlm"}, {"id": "qwen", "type": "llm"}]}}, "qwen", False),
        ({}, "anything", False),
    ],
)
async def test_vision_is_read_from_lm_studio(router: respx.MockRouter, routes: dict, model: str, vision: bool) -> None:
    for path, body in routes.items():
        router.get(f"http://upstream.test/{path}").mock(return_value=httpx.Response(200, json=body))
    router.route().mock(return_value=httpx.Response(404))
    async with UpstreamClient(BASE, transport=httpx.MockTransport(router.handler)) as client:
        assert await client.supports_vision(model) is vision


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("routes", "contexts"),
    [
        ({"api/v1/models": {"models": [
            {"key": "qwen", "max_context_length": 32768,
             "loaded_instances": [{"id": "qwen", "config": {"context_length": 8192}}]},
            {"key": "gemma", "max_context_length": 131072, "loaded_instances": []}]}},
         {"qwen": 8192, "gemma": 131072}),
        ({"api/v0/models": {"data": [{"id": "qwen", "max_context_length": 32768, "loaded_context_length": 4096},
                                     {"id": "bare"}]}},
         {"qwen": 4096}),
        ({}, {}),
    ],
)
async def test_context_lengths_come_from_lm_studio(router: respx.MockRouter, routes: dict, contexts: dict) -> None:
    for path, body in routes.items():
        router.get(f"http://upstream.test/{path}").mock(return_value=httpx.Response(200, json=body))
    router.route().mock(return_value=httpx.Response(404))
    async with UpstreamClient(BASE, transport=httpx.MockTransport(router.handler)) as client:
        assert await client.context_lengths() == contexts


LM_STUDIO = {"api/v1/models": {"models": [{"key": "qwen", "max_context_length": 32768,
                                           "loaded_instances": [{"id": "qwen", "config": {"context_length": 8192}}]}]}}
# llama.cpp's GET /props (tools/server/README.md): the slot's context under default_generation_settings.
LLAMA_CPP = {"props": {"default_generation_settings": {"id": 0, "n_ctx": 4096, "params": {}}, "total_slots": 1,
                       "model_path": "models/qwen.gguf"}}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("routes", "model", "context"),
    [
        (LM_STUDIO, "qwen", 8192),
        (LM_STUDIO, "other", None),  # LM Studio answers for the models it lists only
        ({**LM_STUDIO, **LLAMA_CPP}, "other", None),  # and its word stands: no /props guess beside it
        (LLAMA_CPP, "whatever-the-client-names", 4096),  # llama.cpp serves one model under any name
        ({"props": {"n_ctx": 16384}}, None, 16384),  # older builds and forks: at the top level
        ({"props": {"default_generation_settings": {"n_ctx": 0}}}, "m", None),
        ({"props": ["not", "an", "object"]}, "m", None),
        ({}, "m", None),
    ],
)
async def test_the_context_of_a_request_comes_from_lm_studio_else_llama_cpps_props(
    router: respx.MockRouter, routes: dict, model: str | None, context: int | None
) -> None:
    for path, body in routes.items():
        router.get(f"http://upstream.test/{path}").mock(return_value=httpx.Response(200, json=body))
    router.route().mock(return_value=httpx.Response(404))
    async with UpstreamClient(BASE, transport=httpx.MockTransport(router.handler)) as client:
        assert await client.context_length(model) == context
