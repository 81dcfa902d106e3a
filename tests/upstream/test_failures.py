"""The upstream's failures in words: counts of what arrived before a cut."""

import pytest

from app.upstream.failures import amount


@pytest.mark.parametrize(
    ("count", "unit", "words"),
    [
        (0, "characters of the answer", "0 characters of the answer"),
        (1, "characters of the answer", "1 character of the answer"),
        (1, "bytes of its response", "1 byte of its response"),
        (2, "bytes of its answer", "2 bytes of its answer"),
        (1_024, "characters of the answer", "1,024 characters of the answer"),
        (1, "bytes", "1 byte"),
    ],
)
def test_a_count_reads_as_words(count: int, unit: str, words: str) -> None:
    assert amount(count, unit) == words
