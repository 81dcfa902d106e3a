"""The model server as the status page shows it (respx as transport): LM Studio's loaded models and their context,
llama.cpp's and another server's list, one that does not answer and since when, one that refuses the list; the
transitions in the log; a look at most every few seconds."""

import httpx
import pytest
import respx
import structlog

from app.openai.errors import UpstreamUnreachable
from app.upstream import ModelSeen
from app.upstream.client import UpstreamClient

pytestmark = pytest.mark.anyio
BASE = "http://upstream.test/v1"
LMSTUDIO = {"models": [
    {"key": "gemma-3-12b", "max_context_length": 131072, "loaded_instances": []},
    {"key": "qwen3-8b", "max_context_length": 32768,
     "loaded_instances": [{"id": "qwen3-8b", "config": {"context_length": 8192}}]},
]}


@pytest.fixture
def router() -> respx.MockRouter:
    return respx.MockRouter(using=None, assert_all_called=False)


def client(router: respx.MockRouter) -> UpstreamClient:
    return UpstreamClient(BASE, transport=httpx.MockTransport(router.handler))


@pytest.mark.parametrize(
    ("routes", "models"),
    [
        ({"api/v1/models": LMSTUDIO},
         (ModelSeen("qwen3-8b", 8192, True), ModelSeen("gemma-3-12b", 131072, False))),  # the loaded first
        ({"api/v0/models": {"data": [{"id": "qwen3-8b", "state": "loaded", "loaded_context_length": 4096},
                                     {"id": "phi-4", "state": "not-loaded", "max_context_length": 16384}]}},
         (ModelSeen("qwen3-8b", 4096, True), ModelSeen("phi-4", 16384, False))),
        ({"v1/models": {"data": [{"id": "gguf-model"}]},
          "props": {"default_generation_settings": {"n_ctx": 16384}}},
         (ModelSeen("gguf-model", 16384, None),)),  # llama.cpp: one model, the context of /props
        ({"v1/models": {"data": [{"id": "a"}, {"id": "b"}]}}, (ModelSeen("a", None, None), ModelSeen("b", None, None))),
    ],
)
async def test_a_look_sees_the_models_and_their_context(
    router: respx.MockRouter, routes: dict, models: tuple[ModelSeen, ...]
) -> None:
    for path, body in routes.items():
        router.get(f"http://upstream.test/{path}").mock(return_value=httpx.Response(200, json=body))
    router.route().mock(return_value=httpx.Response(404))
    async with client(router) as upstream:
        state = await upstream.watch.look()
    assert (state.reachable, state.problem, state.models) == (True, None, models)


async def test_a_server_that_does_not_answer_is_seen_so_since_it_went_and_said_once(router: respx.MockRouter) -> None:
    lmstudio = router.get("http://upstream.test/api/v1/models").mock(return_value=httpx.Response(200, json=LMSTUDIO))
    async with client(router) as upstream:
        up = await upstream.watch.look()
        lmstudio.mock(side_effect=httpx.ConnectError("refused"))
        with structlog.testing.capture_logs() as logs:
            down = await upstream.watch.look()
            again = await upstream.watch.look()
            lmstudio.mock(return_value=httpx.Response(200, json=LMSTUDIO))
            back = await upstream.watch.look()
    assert (up.reachable, down.reachable, again.reachable, back.reachable) == (True, False, False, True)
    assert down.problem is not None and "Start LM Studio's local server" in down.problem
    assert up.since is not None and down.since is not None and up.since <= down.since == again.since
    assert again.models == up.models  # as last seen while it answered
    assert [entry["event"] for entry in logs] == ["upstream_unreachable", "upstream_reachable"]


async def test_a_server_that_refuses_the_list_answers_but_says_why(router: respx.MockRouter) -> None:
    router.get("http://upstream.test/v1/models").mock(
        return_value=httpx.Response(401, json={"error": {"message": "Invalid API key"}}))
    router.route().mock(return_value=httpx.Response(401))
    async with client(router) as upstream:
        state = await upstream.watch.look()
    assert state.reachable is True
    assert state.problem == "It answered 401 to GET /models: Invalid API key"


async def test_the_server_is_asked_at_most_every_few_seconds_whoever_asks(router: respx.MockRouter) -> None:
    lmstudio = router.get("http://upstream.test/api/v1/models").mock(return_value=httpx.Response(200, json=LMSTUDIO))
    async with client(router) as upstream:
        for _ in range(5):
            await upstream.watch.fresh()
        assert lmstudio.call_count == 1


async def test_what_a_model_list_meets_counts_as_a_look_at_whether_it_answers(router: respx.MockRouter) -> None:
    models = router.get("http://upstream.test/v1/models").mock(side_effect=httpx.ConnectError("refused"))
    async with client(router) as upstream:
        with pytest.raises(UpstreamUnreachable):
            await upstream.list_models(query="", headers={})
        assert upstream.watch.state.reachable is False
        models.mock(return_value=httpx.Response(200, json={"data": [{"id": "m"}]}))
        router.route().mock(return_value=httpx.Response(404))
        listed = await upstream.list_models(query="", headers={})
        assert (listed.status, upstream.watch.state.reachable) == (200, True)
