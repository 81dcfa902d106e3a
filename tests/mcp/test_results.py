"""Tool results as the model reads them: the envelope for every content type, failures, and the cap."""

import base64
import json

import pytest
from mcp.types import (
    Annotations,
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ListResourcesResult,
    ReadResourceResult,
    Resource,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from app.mcp.results import (
    FailureKind,
    Image,
    render_failure,
    render_listing,
    render_resource,
    render_result,
)
from app.openai.result_format import RenderOptions, recorded_result

PNG = base64.b64encode(b"\x89PNG" + b"\x00" * 66).decode()
CALL = RenderOptions()


def text(value: str, **extra: object) -> TextContent:
    return TextContent(type="text", text=value, **extra)


def envelope(result: CallToolResult, call: RenderOptions = CALL) -> dict:
    return json.loads(render_result(result, call).content)


@pytest.mark.parametrize(
    ("result", "data"),
    [
        (CallToolResult(content=[text("sunny")]), "sunny"),
        (CallToolResult(content=[text('{"temp": 21.5}')]), {"temp": 21.5}),
        (CallToolResult(content=[text("[1, 2]")]), [1, 2]),
        (CallToolResult(content=[text("{not json}")]), "{not json}"),
        (CallToolResult(content=[text("a"), text("b")]), ["a", "b"]),
        (CallToolResult(content=[text('{"t": 1}')], structured_content={"t": 1}), {"t": 1}),
        (CallToolResult(content=[], structured_content={"only": "structured"}), {"only": "structured"}),
        (CallToolResult(content=[ImageContent(type="image", data=PNG, mime_type="image/png")]),
         {"type": "image", "mime_type": "image/png", "size_bytes": 70}),
        (CallToolResult(content=[AudioContent(type="audio", data=PNG, mime_type="audio/wav")]),
         {"type": "audio", "mime_type": "audio/wav", "size_bytes": 70}),
        (CallToolResult(content=[ResourceLink(type="resource_link", uri="file:///a.txt", name="a.txt",
                                              mime_type="text/plain")]),
         {"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt", "mime_type": "text/plain"}),
        (CallToolResult(content=[EmbeddedResource(type="resource", resource=TextResourceContents(
            uri="file:///n.md", text="# Notes"))]), "# Notes"),
        (CallToolResult(content=[EmbeddedResource(type="resource", resource=BlobResourceContents(
            uri="file:///b.zip", blob=PNG, mime_type="application/zip"))]),
         {"type": "resource", "uri": "file:///b.zip", "mime_type": "application/zip", "size_bytes": 70}),
        (CallToolResult(content=[text("for you", annotations=Annotations(audience=["assistant"])),
                                 text("for the user", annotations=Annotations(audience=["user"]))]), "for you"),
    ],
)
def test_every_content_type_becomes_data(result: CallToolResult, data: object) -> None:
    # No meta when it would say nothing: the tool, its server and duration cost a small model tokens and
    # accuracy (bench/eval); the logs and the trace carry them.
    assert envelope(result) == {"status": "success", "data": data}


def test_structured_content_keeps_non_text_blocks_as_attachments() -> None:
    result = CallToolResult(content=[text("{}"), ImageContent(type="image", data=PNG, mime_type="image/png")],
                            structured_content={"chart": "attached"})
    out = envelope(result)
    assert out["data"] == {"chart": "attached"}
    assert out["meta"]["attachments"] == [{"type": "image", "mime_type": "image/png", "size_bytes": 70}]


@pytest.mark.parametrize(
    ("content", "note"),
    [([], "The tool returned no content."),
     ([text("secret", annotations=Annotations(audience=["user"]))], "The tool's output was meant for the user only.")],
)
def test_empty_results_are_null_data_with_a_note(content: list, note: str) -> None:
    out = envelope(CallToolResult(content=content))
    assert (out["status"], out["data"], out["meta"]["note"]) == ("success", None, note)


def test_is_error_gives_an_error_with_the_servers_message() -> None:
    outcome = render_result(CallToolResult(content=[text("City not found: Atlantis")], is_error=True), CALL)
    assert outcome.is_error
    assert json.loads(outcome.content)["status"] == "error"
    assert json.loads(outcome.content)["data"] == {"error": "tool_error", "message": "City not found: Atlantis"}


def test_images_are_kept_for_a_vision_model() -> None:
    outcome = render_result(CallToolResult(content=[ImageContent(type="image", data=PNG, mime_type="image/png")]), CALL)
    assert outcome.images == (Image("image/png", PNG),)


@pytest.mark.parametrize(
    ("kind", "message", "details"),
    [
        (FailureKind.INVALID_ARGUMENTS, "fix them", {"fields": [{"field": "city", "problem": "missing"}]}),
        (FailureKind.TIMEOUT, "too slow", {"retry_after": 5}),
        (FailureKind.UNKNOWN_TOOL, "no such tool", {"similar_tools": ["weather__get_weather"]}),
        (FailureKind.SERVER_UNAVAILABLE, "server down", {}),
    ],
)
def test_failures_are_classified(kind: FailureKind, message: str, details: dict) -> None:
    outcome = render_failure(kind, message, CALL, **details)
    assert outcome.is_error
    assert json.loads(outcome.content)["data"] == {"error": kind.value, "message": message, **details}


LIMIT = 2_000


def capped(data_result: CallToolResult) -> tuple[str, dict]:
    content = render_result(data_result, RenderOptions(max_chars=LIMIT)).content
    return content, json.loads(content)


def test_a_long_list_is_cut_by_whole_items() -> None:
    rows = [{"id": i, "name": f"row {i}"} for i in range(500)]
    content, out = capped(CallToolResult(content=[text(json.dumps(rows))]))
    assert len(content) <= LIMIT
    kept = out["meta"]["truncated"]["kept_items"]
    assert out["data"] == rows[:kept] and 0 < kept < 500
    assert out["meta"]["truncated"]["total_items"] == 500
    assert "ask for less" in out["meta"]["truncated"]["hint"]


def test_the_longest_list_inside_an_object_is_cut_by_items() -> None:
    result = CallToolResult(content=[], structured_content={"query": "q", "results": ["x" * 50] * 200})
    content, out = capped(result)
    assert len(content) <= LIMIT
    assert out["data"]["query"] == "q"
    assert out["meta"]["truncated"]["list"] == "results"
    assert len(out["data"]["results"]) == out["meta"]["truncated"]["kept_items"] < 200


def test_a_long_text_is_cut_by_characters_and_stays_valid_json() -> None:
    content, out = capped(CallToolResult(content=[text("é\"\\" * 50_000)]))
    assert len(content) <= LIMIT
    assert out["meta"]["truncated"]["total_chars"] == 150_000
    assert out["data"] == ("é\"\\" * 50_000)[: out["meta"]["truncated"]["kept_chars"]]


def test_the_longest_text_field_of_an_object_is_cut_and_the_object_kept() -> None:
    result = CallToolResult(content=[], structured_content={"path": "/big.txt", "content": "line\n" * 10_000})
    content, out = capped(result)
    assert len(content) <= LIMIT
    assert out["data"]["path"] == "/big.txt"
    assert out["meta"]["truncated"]["field"] == "content"
    assert out["data"]["content"] == ("line\n" * 10_000)[: out["meta"]["truncated"]["kept_chars"]]


def test_the_default_cap_is_25000_and_small_results_are_untouched() -> None:
    assert RenderOptions().max_chars == 25_000
    _, out = capped(CallToolResult(content=[text("short")]))
    assert out == {"status": "success", "data": "short"}


def test_text_format_joins_text_and_marks_errors() -> None:
    options = RenderOptions(result_format="text", max_chars=LIMIT)
    call = options
    assert render_result(CallToolResult(content=[text("a"), text("b")]), call).content == "a\nb"
    assert render_result(CallToolResult(content=[text("bad")], is_error=True), call).content == "Error: bad"
    long = render_result(CallToolResult(content=[text("x" * 5000)]), call).content
    assert len(long) <= LIMIT and "cut: 5000 characters" in long
    assert render_failure(FailureKind.TIMEOUT, "too slow", call).content == "Error: too slow"


@pytest.mark.parametrize("result_format", ["envelope", "text"])
def test_the_outcome_carries_the_result_as_values_in_either_format(result_format: str) -> None:
    options = RenderOptions(result_format=result_format, max_chars=1_000)  # type: ignore[arg-type]
    many = [{"n": n} for n in range(3_000)]  # over the cap: the content is cut, the data is whole
    ok = render_result(CallToolResult(content=[text(json.dumps(many))]), options)
    assert ok.data == many and len(ok.content) <= 1_000 and (ok.error_kind, ok.error_message) == (None, None)
    failed = render_result(CallToolResult(content=[text("bad zone")], is_error=True), options)
    assert (failed.data, failed.error_kind, failed.error_message) == (None, "tool_error", "bad zone")
    down = render_failure(FailureKind.TIMEOUT, "The tool ran too long.", options)
    assert (down.error_kind, down.error_message, down.retryable) == ("timeout", "The tool ran too long.", True)


@pytest.mark.parametrize(
    ("result_format", "value", "failed", "cut", "expected"),
    [
        ("envelope", {"datetime": "2026"}, False, False, '{"status":"success","data":{"datetime":"2026"}}'),
        ("envelope", "bad zone", True, False, '{"status":"error","data":{"message":"bad zone"}}'),
        ("envelope", '{"rows": [1, 2…', False, True,
         '{"status":"success","data":"{\\"rows\\": [1, 2…","meta":{"truncated":'
         '{"hint":"Only the start of this earlier result was kept."}}}'),
        ("text", {"datetime": "2026"}, False, False, '{"datetime":"2026"}'),
        ("text", "bad zone", True, False, "Error: bad zone"),
    ],
    ids=["data", "error", "cut", "text-data", "text-error"],
)
def test_an_earlier_result_read_back_from_a_trace_is_shown_as_the_model_saw_it(
    result_format: str, value: object, failed: bool, cut: bool, expected: str
) -> None:
    options = RenderOptions(result_format=result_format)  # type: ignore[arg-type]
    assert recorded_result(value, failed, cut, options) == expected
    if result_format == "envelope" and not failed and not cut:  # the same bytes as the first time
        assert expected == render_result(CallToolResult(content=[], structured_content=value), options).content


def test_a_resource_read_in_either_format() -> None:
    read = ReadResourceResult(contents=[
        TextResourceContents(uri="doc://a", mime_type="application/json", text='{"n": 1}'),
        TextResourceContents(uri="doc://b", mime_type="text/markdown", text='{"kept": "as text"}'),
        BlobResourceContents(uri="img://c", mime_type="image/png", blob=base64.b64encode(b"png!").decode()),
    ])
    envelope = render_resource(read, RenderOptions())
    assert json.loads(envelope.content)["data"] == [
        {"n": 1}, '{"kept": "as text"}',
        {"type": "resource", "uri": "img://c", "mime_type": "image/png", "size_bytes": 4}]
    assert [image.mime_type for image in envelope.images] == ["image/png"]
    text = render_resource(read, RenderOptions(result_format="text")).content
    assert text.splitlines()[:2] == ['{"n":1}', '{"kept": "as text"}']
    long = ReadResourceResult(contents=[TextResourceContents(uri="doc://l", mime_type="text/plain", text="x" * 30_000)])
    capped = json.loads(render_resource(long, RenderOptions()).content)
    assert capped["meta"]["truncated"]["total_chars"] == 30_000


def test_a_page_of_resources_says_how_to_get_the_next() -> None:
    page = ListResourcesResult(resources=[Resource(uri="doc://a", name="a")], next_cursor="2")
    assert json.loads(render_listing(page, RenderOptions()).content)["data"] == {
        "resources": [{"uri": "doc://a", "name": "a"}], "next_cursor": "2"}


def test_a_link_names_the_tool_that_reads_it() -> None:
    result = CallToolResult(content=[ResourceLink(type="resource_link", uri="doc://a", name="a")])
    assert json.loads(render_result(result, RenderOptions(), reader="lib__read_resource").content)["data"] == {
        "type": "resource_link", "uri": "doc://a", "name": "a", "read_with": "lib__read_resource"}
    assert "read_with" not in render_result(result, RenderOptions()).content


def _for(audience: list | None) -> Annotations | None:
    return Annotations(audience=audience) if audience is not None else None


@pytest.mark.parametrize(
    ("blocks", "shown"),
    [
        ([text("for both")], ()),  # the model reads it and relays it
        ([text("for you", annotations=_for(["assistant"]))], ()),
        ([text("for the user", annotations=_for(["user"]))], ("for the user",)),
        ([text("both", annotations=_for(["user", "assistant"]))], ()),
        ([ImageContent(type="image", data=PNG, mime_type="image/png")], (Image("image/png", PNG),)),
        ([ImageContent(type="image", data=PNG, mime_type="image/png", annotations=_for(["user"]))],
         (Image("image/png", PNG),)),
        ([ImageContent(type="image", data=PNG, mime_type="image/png", annotations=_for(["assistant"]))], ()),
        ([EmbeddedResource(type="resource", resource=BlobResourceContents(uri="f:///a.png", blob=PNG,
                                                                          mime_type="image/png"))],
         (Image("image/png", PNG),)),
        ([EmbeddedResource(type="resource", resource=TextResourceContents(uri="f:///n.md", text="# Notes"),
                           annotations=_for(["user"]))], ("# Notes",)),
        ([AudioContent(type="audio", data=PNG, mime_type="audio/wav", annotations=_for(["user"]))], ()),
    ],
)
def test_what_a_result_shows_the_person_whatever_the_model_sees(blocks: list, shown: tuple) -> None:
    for failed in (False, True):
        outcome = render_result(CallToolResult(content=blocks, is_error=failed), CALL)
        assert outcome.shown == shown


def test_a_resources_images_are_shown_to_the_person_too() -> None:
    blob = BlobResourceContents(uri="file:///a.png", blob=PNG, mime_type="image/png")
    assert render_resource(ReadResourceResult(contents=[blob]), CALL).shown == (Image("image/png", PNG),)
