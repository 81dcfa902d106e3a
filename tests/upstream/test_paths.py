"""Which pass-through paths and queries may reach the upstream, by table. The client's second check (the URL
stays below the base URL) and the pass-through end to end are in tests/security/ (test_passthrough_escape.py)."""

import pytest

from app.openai.errors import InvalidRequest
from app.upstream.paths import relative_path, without_credentials


@pytest.mark.parametrize(("raw", "sent"), [
    ("models", "models"),
    ("/models", "models"),
    ("//models", "models"),  # leading slashes go: the path stays relative to the base URL
    ("///evil.example/x", "evil.example/x"),
    ("v1/chat/completions", "v1/chat/completions"),
    ("models/", "models/"),
    ("a//b", "a//b"),  # double slashes inside are sent as they are
    ("api/v0/models/qwen%2Fqwen3", "api/v0/models/qwen%2Fqwen3"),  # an encoded slash without dots
    ("...", "..."),  # three dots are a name, not a dot segment
    ("a..", "a.."),
    ("..a", "..a"),
    (".hidden", ".hidden"),
    ("a.b/c..d", "a.b/c..d"),
    ("%2e%2e%2e", "%2e%2e%2e"),
    ("models?x", "models?x"),  # the query is not the path's business
    # An absolute URL is accepted as a path: it is joined below the base (http://upstream/v1/http://...), and
    # the client checks again that the URL stays below the base. (The module's docstring says refused.)
    ("http://evil.example/x", "http://evil.example/x"),
    ("HTTPS://evil.example", "HTTPS://evil.example"),
    ("@evil.example", "@evil.example"),
    ("%2525252e%2525252e", "%2525252e%2525252e"),  # encoded four times: past the three decodings read
    ("%c0%ae%c0%ae", "%c0%ae%c0%ae"),  # overlong UTF-8 decodes to replacement characters, not dots
    ("", ""),
    ("/", ""),
])
def test_paths_that_stay_below_the_base_are_sent_as_they_came(raw: str, sent: str) -> None:
    assert relative_path(raw) == sent


@pytest.mark.parametrize("raw", [
    "..",
    ".",
    "../admin",
    "/../admin",
    "v1/../../admin",
    "v1/..",
    "v1/.",
    "./models",
    "v1/./models",
    "%2e%2e/admin",
    "%2E%2E/admin",
    "%2e./admin",
    ".%2e/admin",
    "%2e",
    "%252e%252e/admin",  # decoded twice
    "%25252e%25252e/admin",  # three times
    "v1%2f..%2fadmin",  # behind an encoded slash
    "v1%2F%2E%2E%2Fadmin",
    "v1%252f..%252fadmin",
    "..%5cadmin",  # a backslash
    "..\\admin",
    "v1\\..\\admin",
    "..;/admin",  # Tomcat's and Spring's path parameters
    "v1/..;jsessionid=x/admin",
    "%2e%2e%3b/admin",
    "．．/admin",  # full-width dots, folded by NFKC
    "%EF%BC%8E%EF%BC%8E/admin",  # the same, encoded
    "\uff0e/admin",
])
def test_dot_segments_are_refused_in_any_encoding(raw: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        relative_path(raw)
    assert refused.value.code == "invalid_path"
    assert "'.' or '..'" in refused.value.message


@pytest.mark.parametrize("raw", [
    "models%00",
    "models\x00",
    "models%0a",
    "models%0D%0AX-Injected: 1",
    "models\r\nX-Injected: 1",
    "models%09",
    "models\t",
    "models%7f",
    "models%1b",
    "models%2500",  # a control character two decodings down
])
def test_control_characters_are_refused_in_any_encoding(raw: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        relative_path(raw)
    assert refused.value.code == "invalid_path"
    assert "control character" in refused.value.message


@pytest.mark.parametrize(("query", "sent"), [
    ("", ""),
    ("a=1", "a=1"),
    ("a=1&a=2", "a=1&a=2"),
    ("a=%20&b", "a=%20&b"),  # nothing removed: the query goes exactly as it came
    ("a=1&&b", "a=1&&b"),
    ("api_key=sk-1", ""),
    ("api-key=sk-1", ""),
    ("access_token=sk-1", ""),
    ("API_KEY=sk-1", ""),  # any case
    ("Access_Token=sk-1", ""),
    ("api%5Fkey=sk-1", ""),  # encoded names are decoded first
    ("api_key", ""),  # without a value
    ("api_key=sk-1&api_key=sk-2", ""),
    ("a=1&api_key=sk-1&b=2", "a=1&b=2"),
    ("api_key=sk-1;a=1", ""),  # `;` separates nothing: it is part of the key's value
    ("a=%20&api_key=sk-1", "a=+"),  # what remains is encoded again when something was removed
    ("a=x%2By&api_key=sk-1", "a=x%2By"),
    # Other names some APIs use for keys are not credentials here.
    ("key=sk-1", "key=sk-1"),
    ("token=sk-1", "token=sk-1"),
    ("apikey=sk-1", "apikey=sk-1"),
    ("api_key_hint=x", "api_key_hint=x"),
])
def test_credentials_are_taken_out_of_the_query(query: str, sent: str) -> None:
    assert without_credentials(query) == sent
