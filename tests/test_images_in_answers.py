"""Issue 28: what tool results address to the person reaches the person, over real HTTP.

Images become markdown images in the answer, in every trace mode, served by the gateway at /images/{id}; text
a server meant for the user alone becomes a quote. The model's view does not change, and what was shown is
gone from the history before the model sees it again. Real MCP servers over stdio (tests/support/mcp_servers/
pictures.py, and server-everything from npm), the official openai SDK as the client.
"""

import base64
import html
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.conftest import Gateway, running_gateway, stdio_entry
from tests.support.fake_upstream import MODEL, Call, FakeUpstream, Turn
from tests.support.mcp_servers.pictures import noise_png
from tests.test_reference_servers import EVERYTHING, INSTALLED

KEY = "sk-images-key"
STORE_MB = 0.5  # so that a handful of pictures fills the store: one may take 128 KiB
TEXT_MARK = "> 💬 "  # starts text meant for the user alone; the quote's other lines start with "> "
IMAGE = re.compile(r"!\[🖼 ([^\]]*)\]\((http://[^)\s]+/images/([\w-]+))\)")
TINY_IMAGE_JS = EVERYTHING.parent.parent / "@modelcontextprotocol" / "server-everything" / "dist" / "tools" / \
    "get-tiny-image.js"


@pytest.fixture(scope="module")
def gateway(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    servers: dict[str, Any] = {"pictures": stdio_entry("pictures.py")}
    if INSTALLED:
        servers["everything"] = {"command": str(EVERYTHING)}
    with running_gateway(tmp_path_factory.mktemp("images"), servers, ready=tuple(servers), key=KEY,
                         upstream_url=f"{upstream.url}/v1", api_keys=KEY, image_store_mb=STORE_MB) as gateway:
        yield gateway


def ask(gateway: Gateway, upstream: FakeUpstream, *calls: Call, stream: bool = False, trace: str | None = None,
        answer: str = "Here it is.", base_url: str | None = None) -> str:
    """The answer's content when the model calls these tools, then answers."""
    upstream.script(Turn(calls=list(calls)), Turn(content=answer))
    headers = {"X-Toolbridge-Trace": trace} if trace else {}
    client = openai.OpenAI(base_url=base_url or f"{gateway.url}/v1", api_key=KEY, max_retries=0,
                           default_headers=headers)
    messages: Any = [{"role": "user", "content": "show me"}]
    if stream:
        chunks = client.chat.completions.create(model=MODEL, messages=messages, stream=True)
        return "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    return client.chat.completions.create(model=MODEL, messages=messages).choices[0].message.content or ""


def fetched(url: str, **headers: str) -> httpx.Response:
    """The image as a browser's <img> asks for it: no key."""
    return httpx.get(url, headers=headers, timeout=10)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_tools_image_is_a_markdown_image_in_the_answer_whose_link_serves_it(
    gateway: Gateway, upstream: FakeUpstream, stream: bool
) -> None:
    content = ask(gateway, upstream, Call("pictures__picture", {"kilobytes": 40}), stream=stream)
    [(alt, url, _)] = IMAGE.findall(content)
    assert alt == "pictures__picture" and url.startswith(f"{gateway.url}/images/")
    assert content.index(url) < content.index("Here it is.")  # where the tool ran, before the words after it
    response = fetched(url)
    assert response.status_code == 200
    assert response.content == noise_png(40)
    assert response.headers["content-type"] == "image/png"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["content-security-policy"] == "default-src 'none'; sandbox"
    assert response.headers["cache-control"].startswith("private")
    # The model's view is as before: the image described by type and size (this model has no vision).
    [tool_message] = [m for m in upstream.chat_requests()[1]["messages"] if m["role"] == "tool"]
    assert {"type": "image", "mime_type": "image/png", "size_bytes": len(noise_png(40))} in json.loads(
        tool_message["content"])["data"]


@pytest.mark.parametrize("trace", ["reasoning", "markdown", "off"])
def test_every_trace_mode_shows_the_image_and_the_text_meant_for_the_user(
    gateway: Gateway, upstream: FakeUpstream, trace: str
) -> None:
    content = ask(gateway, upstream, Call("pictures__for_you", {}), stream=True, trace=trace)
    assert f"{TEXT_MARK}**Saved.**\n> Your report is ready." in content
    [(_, url, _)] = IMAGE.findall(content)
    assert fetched(url).content == noise_png(2, seed=3)
    # The model never reads what was meant for the user alone; it reads what was meant for it.
    second = json.dumps(upstream.chat_requests()[1])
    assert "Saved." not in second and "report is ready" not in second
    assert "the model reads this" in second


def test_the_details_trace_puts_small_images_in_open_webuis_widget_and_links_large_ones(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    content = ask(gateway, upstream, Call("pictures__for_you", {}), Call("pictures__picture", {"kilobytes": 40}),
                  trace="details")
    blocks = re.findall(r'<details type="tool_calls"[^>]*>', content)
    assert len(blocks) == 2
    files = [json.loads(html.unescape(m.group(1))) if (m := re.search(r' files="([^"]*)"', block)) else None
             for block in blocks]
    # Open WebUI's widget shows data: URLs (it replaces any other URL by its logo): the small picture is there.
    assert files[0] == [f"data:image/png;base64,{base64.b64encode(noise_png(2, seed=3)).decode()}"]
    assert files[1] is None
    [(alt, url, _)] = IMAGE.findall(content)  # the large one is linked after the blocks
    assert alt == "pictures__picture" and fetched(url).content == noise_png(40)
    assert f"{TEXT_MARK}**Saved.**" in content


def test_images_that_are_not_safe_raster_images_are_never_served(gateway: Gateway, upstream: FakeUpstream) -> None:
    content = ask(gateway, upstream, Call("pictures__svg", {}), Call("pictures__disguised", {}))
    assert IMAGE.findall(content) == []
    assert "pictures__svg returned an image this gateway does not show (type image/svg+xml)" in content
    assert "pictures__disguised returned an image this gateway does not show (type image/png)" in content


def test_an_image_larger_than_a_quarter_of_the_store_is_described_not_kept(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    content = ask(gateway, upstream, Call("pictures__picture", {"kilobytes": 200}))
    assert IMAGE.findall(content) == []
    assert f"the most is {int(STORE_MB * 1024 * 1024) // 4:,}" in content


def test_unknown_expired_and_evicted_images_are_an_openai_404(
    gateway: Gateway, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    for image_id in ("nope", "A" * 32):
        response = fetched(f"{gateway.url}/images/{image_id}")
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "image_not_found"
        assert response.json()["error"]["type"] == "not_found_error"
    assert fetched(f"{gateway.url}/images/..%2F..%2Fhealth").status_code == 404
    # Evicted: the store holds 512 KiB; five more 100 KB pictures push the first one out, and only it.
    [(_, first, _)] = IMAGE.findall(ask(gateway, upstream, Call("pictures__picture", {"kilobytes": 100})))
    more = [Call("pictures__picture", {"kilobytes": 100, "seed": seed}) for seed in range(5)]
    urls = [url for _, url, _ in IMAGE.findall(ask(gateway, upstream, *more))]
    assert fetched(first).status_code == 404
    assert [fetched(url).status_code for url in urls] == [200] * 5
    # Expired: past TOOLBRIDGE_IMAGE_MAX_AGE_HOURS, on the store's monotonic clock.
    import app.chat.answer.images

    later = app.chat.answer.images.monotonic() + gateway.settings.tools.image_max_age_hours * 3600 + 1
    monkeypatch.setattr(app.chat.answer.images, "monotonic", lambda: later)
    response = fetched(urls[-1])
    assert response.status_code == 404 and response.json()["error"]["code"] == "image_not_found"


def test_the_link_works_without_the_key_but_not_from_a_foreign_host_or_page(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    [(_, url, _)] = IMAGE.findall(ask(gateway, upstream, Call("pictures__picture", {"kilobytes": 4})))
    assert fetched(url).status_code == 200  # an <img> sends no key: the id is the key
    assert fetched(url, Authorization="Bearer wrong").status_code == 200
    assert httpx.get(f"{gateway.url}/health").json() == {"status": "ok"}  # the rest still asks for the key
    rebinding = fetched(url, Host="evil.example")
    assert rebinding.status_code == 403 and rebinding.json()["error"]["code"] == "host_not_allowed"
    foreign = fetched(url, Origin="https://evil.example")  # a page reading it with fetch(): CORS mode
    assert foreign.status_code == 403 and foreign.json()["error"]["code"] == "origin_not_allowed"


def test_the_link_starts_from_the_address_the_client_used(gateway: Gateway, upstream: FakeUpstream) -> None:
    local = gateway.url.replace("127.0.0.1", "localhost")
    [(_, url, _)] = IMAGE.findall(ask(gateway, upstream, Call("pictures__picture", {"kilobytes": 4}),
                                      base_url=f"{local}/v1"))
    assert url.startswith(f"{local}/images/")
    assert fetched(url).status_code == 200


def test_the_link_starts_from_the_public_url_when_set(upstream: FakeUpstream, tmp_path: Path) -> None:
    with running_gateway(tmp_path, {"pictures": stdio_entry("pictures.py")}, ready=("pictures",),
                         upstream_url=f"{upstream.url}/v1", public_url="https://chat.example.org/gateway/") as gateway:
        content = ask(gateway, upstream, Call("pictures__picture", {"kilobytes": 4}))
    assert re.search(r"\]\(https://chat\.example\.org/gateway/images/[\w-]{32}\)", content), content


def test_nothing_is_shown_when_turned_off(upstream: FakeUpstream, tmp_path: Path) -> None:
    with running_gateway(tmp_path, {"pictures": stdio_entry("pictures.py")}, ready=("pictures",),
                         upstream_url=f"{upstream.url}/v1", show_user_content=False) as gateway:
        content = ask(gateway, upstream, Call("pictures__for_you", {}), answer="Done.")
    assert content == "Done."


def test_what_was_shown_is_gone_from_the_history_and_the_turn_is_remembered(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    shown = ask(gateway, upstream, Call("pictures__for_you", {}), stream=True, answer="Your report is saved.")
    assert IMAGE.search(shown) and TEXT_MARK in shown
    upstream.script(Turn(content="You are welcome."))
    gateway.client(api_key=KEY).chat.completions.create(model=MODEL, messages=[
        {"role": "user", "content": "show me"}, {"role": "assistant", "content": shown},
        {"role": "user", "content": "thanks"}])
    messages = upstream.chat_requests()[-1]["messages"]
    assert "images/" not in json.dumps(messages) and "Saved." not in json.dumps(messages)
    # The answer's text, less what was shown, is what memory stored the turn under: its tool call comes back.
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert messages[4]["content"] == "Your report is saved."


@pytest.mark.skipif(not INSTALLED, reason="server-everything not installed: npm ci --prefix tests/npm")
def test_server_everythings_image_and_user_message_reach_the_person(gateway: Gateway, upstream: FakeUpstream) -> None:
    tiny = base64.b64decode(TINY_IMAGE_JS.read_text().split('"')[1])
    content = ask(gateway, upstream, Call("everything__get-tiny-image", {}), stream=True)
    [(_, url, _)] = IMAGE.findall(content)
    response = fetched(url)
    assert response.content == tiny and response.headers["content-type"] == "image/png"
    content = ask(gateway, upstream, Call("everything__get-annotated-message",
                                          {"messageType": "success", "includeImage": True}))
    assert f"{TEXT_MARK}Operation completed successfully" in content
    [(_, url, _)] = IMAGE.findall(content)  # the image it addresses to the user alone
    assert fetched(url).content == tiny
    [tool_message] = [m for m in upstream.chat_requests()[1]["messages"] if m["role"] == "tool"]
    note = json.loads(tool_message["content"])["meta"]["note"]
    assert note == "The tool's output was meant for the user only."  # the model's view, as before


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_on_the_responses_door_the_image_follows_its_call_into_the_answers_last_message(
    gateway: Gateway, upstream: FakeUpstream, stream: bool
) -> None:
    """Issue 45 (C10): `codex exec` prints the last message item as its answer, and the image came before the
    mcp_call that made it, in a message of its own. The model thinks again before it answers, as a reasoning
    model does: the link still goes with its words."""
    upstream.script(Turn(calls=[Call("pictures__picture", {"kilobytes": 4})]),
                    Turn(reasoning="The picture came back.", content="Here it is."))
    client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=KEY, max_retries=0)
    if stream:
        with client.responses.stream(model=MODEL, input="show me") as events:
            response = events.get_final_response()
    else:
        response = client.responses.create(model=MODEL, input="show me")
    assert [item.type for item in response.output] == ["reasoning", "mcp_call", "reasoning", "message"]
    last = response.output[-1]
    assert last.type == "message" and last.content[0].type == "output_text"
    [(_, url, _)] = IMAGE.findall(last.content[0].text)
    assert last.content[0].text.endswith("Here it is.") and fetched(url).content == noise_png(4)
    assert response.output_text == last.content[0].text
