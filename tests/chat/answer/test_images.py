"""The image store behind /images/{id}: its types, ids, byte bound and lifetime, on a clock the test moves."""

import pytest

import app.chat.answer.images
from app.chat.answer.images import ImageStore, image_type
from tests.support.mcp_servers.pictures import HTML, SVG, noise_png

PNG = noise_png(1)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (PNG, "image/png"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF", "image/jpeg"),
        (b"GIF89a\x01\x00", "image/gif"),
        (b"GIF87a\x01\x00", "image/gif"),
        (b"RIFF\x24\x00\x00\x00WEBPVP8 ", "image/webp"),
        (b"\x00\x00\x00\x1cftypavif\x00\x00", "image/avif"),
        (SVG, None),  # a document with scripts, whatever the server calls it
        (HTML, None),
        (b"<?xml version='1.0'?><svg/>", None),
        (b"BM\x00\x00", None),  # raster, but not on the list
        (b"", None),
    ],
)
def test_only_the_bytes_of_allowed_raster_types_are_images(data: bytes, expected: str | None) -> None:
    assert image_type(data) == expected


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(app.chat.answer.images, "monotonic", lambda: now[0])
    return now


def test_an_image_is_found_by_an_unguessable_id_until_it_expires(clock: list[float]) -> None:
    store = ImageStore(max_bytes=1000, max_age_seconds=60)
    first, second = store.put(b"a" * 10, "image/png"), store.put(b"a" * 10, "image/png")
    assert first is not None and second is not None and first != second
    assert len(first) == 32 and first.replace("-", "").replace("_", "").isalnum()
    stored = store.get(first)
    assert stored is not None and stored.data == b"a" * 10 and stored.mime_type == "image/png"
    assert stored.seconds_left() == 60
    clock[0] += 59.9
    assert store.get(first) is not None
    clock[0] += 0.1
    assert store.get(first) is None and store.get(second) is None
    assert store.total_bytes == 0
    assert store.get("unknown") is None


def test_the_oldest_images_make_room_within_the_byte_bound(clock: list[float]) -> None:
    store = ImageStore(max_bytes=100, max_age_seconds=60)
    ids = [store.put(bytes([n]) * 25, "image/png") for n in range(4)]
    assert store.total_bytes == 100
    newest = store.put(b"x" * 25, "image/png")
    assert store.get(ids[0]) is None  # the oldest went
    assert all(store.get(image_id) is not None for image_id in [*ids[1:], newest])
    assert store.total_bytes == 100


def test_an_image_larger_than_a_quarter_of_the_store_is_not_kept(clock: list[float]) -> None:
    store = ImageStore(max_bytes=100, max_age_seconds=60)
    kept = store.put(b"k" * 25, "image/png")
    assert store.put(b"x" * 26, "image/png") is None
    assert store.get(kept) is not None and store.total_bytes == 25
