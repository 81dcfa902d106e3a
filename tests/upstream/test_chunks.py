"""A chat answer read into batches of chunks, from bytes as they arrive: no server, no socket."""

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.openai.errors import UpstreamError
from app.upstream.chunks import MAX_BATCH, chunk_batches
from app.upstream.failures import BROKEN_READ

SSE = "text/event-stream"


def event(content: str, finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": {"content": content}, "finish_reason": finish}
    return b"data: " + httpx.Response(200, json={"choices": [choice]}).content + b"\n\n"


async def arriving(*reads: bytes, broken: BaseException | None = None) -> AsyncIterator[bytes]:
    for read in reads:
        yield read
    if broken is not None:
        raise broken


def said(exc: BaseException, received: str) -> UpstreamError:
    assert isinstance(exc, BROKEN_READ)
    return UpstreamError(f"broke off after {received}")


async def batches(content_type: str, parts: AsyncIterator[bytes]) -> list[list[dict[str, Any]]]:
    return [batch async for batch in chunk_batches(content_type, parts, said)]


def contents(found: list[list[dict[str, Any]]]) -> list[list[str]]:
    return [[chunk["choices"][0]["delta"]["content"] for chunk in batch] for batch in found]


@pytest.mark.anyio
async def test_batches_of_one_read_grow_1_2_4_so_the_first_words_go_on_at_once() -> None:
    read = b"".join(event(str(n)) for n in range(7)) + event("", "stop")
    assert [len(batch) for batch in await batches(SSE, arriving(read))] == [1, 2, 4, 1]


@pytest.mark.anyio
async def test_batches_stop_growing_at_the_most() -> None:
    read = b"".join(event("x") for _ in range(3 * MAX_BATCH)) + b"data: [DONE]\n\n"
    sizes = [len(batch) for batch in await batches(SSE, arriving(read))]
    assert max(sizes) == MAX_BATCH and sum(sizes) == 3 * MAX_BATCH


@pytest.mark.anyio
async def test_each_read_is_its_own_batch_and_done_ends_the_answer() -> None:
    reads = (event("a"), event("b"), event("c") + b"data: [DONE]\n\n" + event("never"), event("never"))
    assert contents(await batches(SSE, arriving(*reads))) == [["a"], ["b"], ["c"]]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("reads", "broken", "words"),
    [
        ((event("Hal"),), None, "ended its stream unfinished after 3 characters of the answer"),
        ((event("Hal"),), httpx.ReadError("reset"), "broke off after 3 characters of the answer"),
        ((b'data: {"error": {"message": "out of memory"}}\n\n',), None, "Upstream error: out of memory"),
        ((b"data: [1, 2]\n\n",), None, "not a JSON object"),
        ((b"data: {not json\n\n",), None, "not JSON"),
    ],
)
async def test_a_stream_that_fails_says_how_and_after_how_much(
    reads: tuple[bytes, ...], broken: BaseException | None, words: str
) -> None:
    with pytest.raises(UpstreamError, match=words):
        await batches(SSE, arriving(*reads, broken=broken))


@pytest.mark.anyio
async def test_a_json_answer_is_one_chunk_and_a_cut_one_is_counted_in_bytes() -> None:
    whole = b'{"choices": [{"message": {"content": "whole"}}], "logprob": NaN}'
    [[chunk]] = await batches("application/json", arriving(whole[:10], whole[10:]))
    assert chunk["choices"][0]["message"]["content"] == "whole"  # NaN read as Python reads it
    with pytest.raises(UpstreamError, match="broke off after 10 bytes of its answer"):
        await batches("application/json", arriving(whole[:10], broken=TimeoutError()))
