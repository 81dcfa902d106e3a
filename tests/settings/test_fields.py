"""An unknown field in one phrase: the nearest known field, the same name at another level first."""

import pytest

from app.settings.fields import nearest_field, unknown_field

SERVER = ["command", "args", "env", "timeout", "connectTimeout", "connect_timeout", "confirm", "disabled", "oauth"]
OAUTH = ["grant", "scopes", "client_id", "clientId", "issuer", "per_key", "perKey"]
FROM_SERVER = {'"oauth.{}"': OAUTH}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("confim", '"confirm"'),  # a close spelling here
        ("Confirm", '"confirm"'),
        ("connect-timeout", '"connectTimeout"'),  # the same word: the first spelling, the one the docs use
        ("per_key", '"oauth.per_key"'),  # the same name at another level beats any close spelling here
        ("perKey", '"oauth.per_key"'),
        ("PER-KEY", '"oauth.per_key"'),
        ("scope", '"oauth.scopes"'),
        ("issuers", '"oauth.issuer"'),
        ("enviroment", None),
        ("xyzzy", None),
    ],
)
def test_the_nearest_field_is_a_misplaced_one_first_then_a_misspelt_one(name: str, expected: str | None) -> None:
    assert nearest_field(name, SERVER, FROM_SERVER) == expected


def test_a_small_level_lists_its_fields_when_none_is_near() -> None:
    assert unknown_field("xyzzy", ["servers", "toolsets", "name"]) == 'unknown field "xyzzy" (known: servers, ' \
        "toolsets, name)"
    assert unknown_field("xyzzy", SERVER) == 'unknown field "xyzzy"'


def test_a_name_that_may_be_a_secret_is_repeated_only_near_a_known_field() -> None:
    assert unknown_field("sk-live-0123456789", ["keys"], named=False) == (
        "an unknown field, not repeated in case it is a key (known: keys)")
    assert unknown_field("key", ["keys"], named=False) == 'unknown field "key" (did you mean "keys"?)'


def test_a_name_is_quoted_on_one_line_and_bounded() -> None:
    assert unknown_field("a\nb", SERVER) == 'unknown field "a\\nb"'
    assert unknown_field("x" * 100, SERVER) == f'unknown field "{"x" * 64}..."'
