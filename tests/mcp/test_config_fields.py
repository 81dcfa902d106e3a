"""mcp.json's fields by level: other products' accepted by name and each listed in the docs, their names read as
ours, and nothing of theirs loosening approvals."""

import re
from pathlib import Path

import pytest

from app.mcp.config import HttpServerConfig, OAuthConfig, StdioServerConfig
from app.mcp.config_fields import (
    ADOPTED,
    CURSOR_AUTH,
    ENV_FILE,
    IGNORED_OAUTH,
    IGNORED_SERVER,
    IGNORED_TOP,
    REFUSED,
    adopted,
    ignored,
    spellings,
)

DOCS = Path(__file__).parents[2] / "docs" / "configuration.md"


def test_every_other_products_field_is_in_the_docs_table() -> None:
    table = DOCS.read_text().split("### Other products' fields", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`(?:oauth\.)?([$\w]+)`", table))
    fields = {*ADOPTED, *CURSOR_AUTH, ENV_FILE, *IGNORED_TOP, *IGNORED_SERVER, *IGNORED_OAUTH, *REFUSED}
    assert fields - listed == set()


def test_no_other_products_field_shadows_one_of_ours() -> None:
    ours = {*spellings(StdioServerConfig), *spellings(HttpServerConfig), *spellings(OAuthConfig)}
    assert ours & {*ADOPTED, ENV_FILE, *IGNORED_SERVER, *IGNORED_OAUTH, *REFUSED} == set()


@pytest.mark.parametrize(
    ("entry", "ours"),
    [
        ({"serverUrl": "u", "transportType": "sse"}, {"url": "u", "type": "sse"}),
        ({"url": "u", "auth": {"CLIENT_ID": "i", "CLIENT_SECRET": "s", "scopes": ["a"]}},
         {"url": "u", "oauth": {"client_id": "i", "client_secret": "s", "scopes": ["a"]}}),
        ({"url": "u", "oauth": {"clientId": "i", "callbackPort": 1}, "headersHelper": "x"},
         {"url": "u", "oauth": {"clientId": "i"}}),
        ({"command": "c", "autoApprove": ["*"], "alwaysAllow": ["w"], "confirm": True},
         {"command": "c", "confirm": True}),
    ],
)
def test_other_products_names_are_read_as_ours_and_unused_fields_left_out(entry: dict, ours: dict) -> None:
    assert adopted(entry) == ours


def test_the_unused_fields_are_named_for_the_log() -> None:
    assert ignored({"command": "c", "autoApprove": [], "oauth": {"callbackPort": 1}}) == [
        "autoApprove", "oauth.callbackPort"]


def test_the_models_fields_are_known_in_the_spelling_the_docs_use_first() -> None:
    assert spellings(StdioServerConfig)[:4] == ["disabled", "timeout", "connectTimeout", "connect_timeout"]
    assert spellings(OAuthConfig, alias_first=False)[-2:] == ["per_key", "perKey"]
