"""What the upstream is and can do, asked of LM Studio's and llama.cpp's own endpoints (respx as transport)."""

import httpx
import pytest
import respx

from app.upstream.client import UpstreamClient

BASE = "http://upstream.test/v1"


@pytest.fixture
def router() -> respx.MockRouter:
    return respx.MockRouter(using=None, assert_all_called=False)


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


@pytest.mark.anyio
async def test_lm_studios_models_are_asked_once_a_while_not_per_request(router: respx.MockRouter) -> None:
    route = router.get("http://upstream.test/api/v1/models").mock(
        return_value=httpx.Response(200, json=LM_STUDIO["api/v1/models"])
    )
    async with UpstreamClient(BASE, transport=httpx.MockTransport(router.handler)) as client:
        assert await client.context_length("qwen") == 8192
        assert await client.supports_vision("qwen") is False
        assert await client.context_lengths() == {"qwen": 8192}
    assert route.call_count == 1


@pytest.mark.anyio
async def test_an_upstream_that_does_not_answer_has_no_capabilities(router: respx.MockRouter) -> None:
    router.route().mock(side_effect=httpx.ConnectError("refused"))
    async with UpstreamClient(BASE, transport=httpx.MockTransport(router.handler)) as client:
        assert (await client.context_length("m"), await client.supports_vision("m")) == (None, False)
