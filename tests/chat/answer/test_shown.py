"""What tool results show the person, written into the answer and removed from the history, rule by rule."""

import base64
import html
import json
import re
from dataclasses import dataclass
from typing import Any

import pytest

from app.chat.answer.images import ImageStore
from app.chat.answer.trace import PersonView, read_back, render_finished, strip_shown, strip_trace
from app.mcp.results import Image
from tests.support.mcp_servers.pictures import SVG, noise_png

SMALL, LARGE = noise_png(2), noise_png(40)


@dataclass
class C:
    id: str
    name: str
    arguments: str = "{}"


@dataclass
class Out:
    shown: tuple[Any, ...] = ()
    content: str = '{"status":"success","data":"ok"}'
    is_error: bool = False
    data: Any = "ok"
    error_message: str | None = None


def image(data: bytes, mime_type: str = "image/png") -> Image:
    return Image(mime_type, base64.b64encode(data).decode())


@pytest.fixture
def view() -> PersonView:
    return PersonView(ImageStore(max_bytes=400_000, max_age_seconds=60), lambda: "http://gw.test:8000/",
                      inline_bytes=16_384)


def served(view: PersonView, text: str) -> list[bytes]:
    ids = re.findall(r"\]\(http://gw\.test:8000/images/([\w-]{32})\)", text)
    return [stored.data for image_id in ids if (stored := view.store.get(image_id)) is not None]


def test_images_are_linked_and_user_text_quoted_in_order(view: PersonView) -> None:
    shown = view.show([C("1", "draw")], [Out((image(LARGE), "Saved.\n\nSee **below**.", image(SMALL)))],
                      in_widget=False)
    assert shown.files == [[]]
    assert shown.text.startswith("\n\n![🖼 draw](http://gw.test:8000/images/") and shown.text.endswith(")\n\n")
    assert "\n\n> 💬 Saved.\n>\n> See **below**.\n\n![🖼 draw](" in shown.text
    assert served(view, shown.text) == [LARGE, SMALL]


def test_nothing_shown_is_no_text(view: PersonView) -> None:
    assert view.show([C("1", "a"), C("2", "b")], [Out(), Out()], in_widget=True).text == ""


def test_in_open_webuis_widget_small_images_are_data_urls_and_large_ones_links(view: PersonView) -> None:
    shown = view.show([C("1", "a"), C("2", "b")], [Out((image(SMALL),)), Out((image(LARGE),))], in_widget=True)
    assert shown.files == [[f"data:image/png;base64,{base64.b64encode(SMALL).decode()}"], []]
    assert served(view, shown.text) == [LARGE]
    unlimited = PersonView(view.store, view.base_url, inline_bytes=0)
    assert unlimited.show([C("1", "a")], [Out((image(SMALL),))], in_widget=True).files == [[]]


@pytest.mark.parametrize(
    ("item", "note"),
    [
        (image(SVG, "image/svg+xml"), "> 🖼 t returned an image this gateway does not show (type image/svg+xml)."),
        (image(b"<html>", "image/png"), "> 🖼 t returned an image this gateway does not show (type image/png)."),
        (Image("image/png", "%%% not base64"), "> 🖼 t returned an image this gateway does not show (type image/png)."),
        (image(noise_png(120)), "> 🖼 t returned an image too large to show here"),
    ],
    ids=["svg", "html-as-png", "bad-base64", "too-large"],
)
def test_an_image_that_is_not_shown_is_said_so(view: PersonView, item: Image, note: str) -> None:
    shown = view.show([C("1", "t")], [Out((item,))], in_widget=True)
    assert shown.text.strip().startswith(note) and shown.files == [[]]
    assert view.store.total_bytes == 0


def test_names_and_texts_cannot_break_out_of_their_markdown(view: PersonView) -> None:
    shown = view.show([C("1", "x](javascript:alert(1))[")], [Out(("a\n<details type=\"tool_calls\" done=\"true\">",
                                                                   image(SMALL)))], in_widget=False)
    assert "![🖼 xjavascript:alert1](http://gw.test:8000/images/" in shown.text
    assert "<details" not in shown.text and "> &lt;details" in shown.text
    assert read_back("answer" + shown.text) is None  # never read back as a call the model made


MODEL_TEXT = "I looked.\n\n> A quote of the model's own.\n\n![chart](https://example.org/chart.png)\n\nDone."


@pytest.mark.parametrize("mode", ["reasoning", "details", "markdown", "off"])
def test_what_was_shown_is_removed_from_the_history_in_every_mode(view: PersonView, mode: str) -> None:
    calls = [C("call_1", "draw")]
    outputs = [Out((image(SMALL), "For you\nonly.", image(LARGE), image(SVG, "image/svg+xml")))]
    shown = view.show(calls, outputs, in_widget=mode == "details")
    trace = render_finished(mode, calls, outputs, [5], shown.files)  # type: ignore[arg-type]
    trace_text = trace.text if trace and trace.channel == "content" else ""
    before, after = MODEL_TEXT.split("\n\n", 1)
    sent_back = before + trace_text + shown.text + after
    assert strip_trace(sent_back) == f"{before}\n\n{after}"


def test_a_details_block_with_images_still_reads_back_as_its_call(view: PersonView) -> None:
    calls, outputs = [C("call_1", "draw")], [Out((image(SMALL),))]
    shown = view.show(calls, outputs, in_widget=True)
    trace = render_finished("details", calls, outputs, [5], shown.files)  # type: ignore[arg-type]
    assert trace is not None
    opening = trace.text.splitlines()[1]
    files = json.loads(html.unescape(re.search(r' files="([^"]*)"', opening).group(1)))  # type: ignore[union-attr]
    assert files == shown.files[0]
    parts = read_back("Looking." + trace.text + "Here.")
    assert parts is not None and parts[1][0].name == "draw" and parts[1][0].result == "ok"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "text",
    [
        "no marks at all",
        "![🖼 not a link]",
        "A 🖼 picture frame in a sentence, and a > 💬 in the middle of a line",
        "![🖼 an image](with/words) after it on the line",
    ],
)
def test_text_that_only_looks_like_ours_is_left_alone(text: str) -> None:
    assert strip_shown(text) == text


def test_removal_is_one_pass_over_long_hostile_histories() -> None:
    hostile = ("> 💬 x\n" + ">\n" * 50_000 + "\n") * 4 + "kept" + "\n" * 200_000 + "![🖼 a](b)\n" * 50_000 + "end"
    assert strip_shown(hostile) == "kept\n\nend"
