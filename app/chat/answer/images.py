"""Images from tool results, kept for a while so that people's browsers can load them from the gateway.

An `<img>` in a chat client's page cannot send the API key, so an image is reached by an unguessable id
(192 random bits) that only the answer it was shown in carries: a capability, like a signed link. Each
lives `max_age_seconds`, and all of them together hold at most `max_bytes`: the oldest go first. An image
larger than a quarter of that is not kept, so that one cannot push out all the others.

What is served is only what the bytes show to be a raster image of an allowed type (PNG, JPEG, GIF,
WebP, AVIF), whatever type the server claimed: never SVG or HTML, which a browser would run as a document.
"""

import secrets
from collections import OrderedDict
from dataclasses import dataclass
from time import monotonic

ID_BYTES = 24  # 192 bits, written in 32 URL-safe characters
SHARE_OF_STORE = 4  # one image may take at most a quarter of the store


def image_type(data: bytes) -> str | None:
    """The image type the bytes begin with, when it is one that may be served; else None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[4:8] == b"ftyp" and data[8:12] in (b"avif", b"avis"):
        return "image/avif"
    return None


@dataclass(frozen=True)
class StoredImage:
    data: bytes
    mime_type: str
    expires: float  # on the monotonic clock

    def seconds_left(self) -> int:
        return max(0, int(self.expires - monotonic()))


class ImageStore:
    """Images by id, bounded in total bytes and in age; in this process only."""

    def __init__(self, max_bytes: int, max_age_seconds: float) -> None:
        self.max_bytes = max_bytes
        self.max_age_seconds = max_age_seconds
        self._images: OrderedDict[str, StoredImage] = OrderedDict()  # oldest first
        self._bytes = 0

    @property
    def max_image_bytes(self) -> int:
        return self.max_bytes // SHARE_OF_STORE

    @property
    def total_bytes(self) -> int:
        return self._bytes

    def put(self, data: bytes, mime_type: str) -> str | None:
        """Keeps the image and returns its id; None when it is larger than one image may be."""
        if len(data) > self.max_image_bytes:
            return None
        now = monotonic()
        self._forget_expired(now)
        while self._images and self._bytes + len(data) > self.max_bytes:
            self._drop_oldest()
        image_id = secrets.token_urlsafe(ID_BYTES)
        self._images[image_id] = StoredImage(data, mime_type, now + self.max_age_seconds)
        self._bytes += len(data)
        return image_id

    def get(self, image_id: str) -> StoredImage | None:
        """The image, unless it is unknown, evicted or expired."""
        self._forget_expired(monotonic())
        return self._images.get(image_id)

    def _forget_expired(self, now: float) -> None:
        # Every image lives equally long, so the oldest expire first: only the front needs looking at.
        while self._images and next(iter(self._images.values())).expires <= now:
            self._drop_oldest()

    def _drop_oldest(self) -> None:
        _, image = self._images.popitem(last=False)
        self._bytes -= len(image.data)
