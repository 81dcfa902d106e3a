"""The guards' pure checks by table: Host and Origin (DNS rebinding, web pages), what may change things, a
POST's content type, the key, the declared size. The middlewares end to end are in tests/security/."""

import base64

import pytest
from starlette.datastructures import Headers

from app.access import EVERYTHING, KeyRing
from app.api.guard import (
    AdmissionGuard,
    BrowserGuard,
    basic_password,
    bind_address,
    content_type_refusal,
    for_the_page,
    host_name,
    is_json,
    is_loopback,
    may_change_things,
)
from app.openai.errors import AuthenticationFailed, Forbidden, InvalidRequest
from app.settings import Settings


def browser_guard(**settings: str) -> BrowserGuard:
    return BrowserGuard(None, Settings.load(_env_file=None, **settings).server)  # type: ignore[arg-type]


def admission_guard(**settings: str | int) -> AdmissionGuard:
    made = Settings.load(_env_file=None, **settings)
    return AdmissionGuard(None, made, KeyRing(made.access.client_keys, None, {}))  # type: ignore[arg-type]


@pytest.mark.parametrize(("host", "name"), [
    ("localhost", "localhost"),
    ("LocalHost:8000", "localhost"),
    ("Example.COM:80", "example.com"),
    (" example.com ", "example.com"),
    ("example.com.", "example.com."),  # a trailing dot is kept: a listed name must match it as written
    ("[::1]:8000", "::1"),
    ("[::1]", "::1"),
    ("[FE80::1]:80", "fe80::1"),
    ("::1", "::1"),  # unbracketed IPv6: no port can be told apart, the whole is the name
    ("::1:8000", "::1:8000"),
    ("a:b:c", "a:b:c"),
    ("[::1", "[::1"),  # no closing bracket: kept whole
    ("", ""),
])
def test_a_host_headers_name_is_without_its_port_and_lowercased(host: str, name: str) -> None:
    assert host_name(host) == name


@pytest.mark.parametrize(("name", "loopback"), [
    ("localhost", True),
    ("LOCALHOST", True),
    ("localhost.", True),
    ("app.localhost", True),  # RFC 6761: *.localhost is always loopback
    ("evil.localhost.", True),
    ("127.0.0.1", True),
    ("127.0.0.1.", True),
    ("127.255.255.254", True),
    ("::1", True),
    ("[::1]", True),
    ("[::1", True),  # brackets are stripped, matched or not
    ("0:0:0:0:0:0:0:1", True),
    ("localhost.evil.example", False),
    ("localhostx", False),
    ("127.0.0.1.nip.io", False),
    ("127.1", False),  # short forms that browsers resolve are not read as addresses here: refused
    ("2130706433", False),
    ("0x7f000001", False),
    ("0.0.0.0", False),
    ("::", False),
    ("10.0.0.1", False),
    ("fe80::1", False),
    ("", False),
])
def test_loopback_names_and_addresses(name: str, loopback: bool) -> None:
    assert is_loopback(name) is loopback


@pytest.mark.parametrize(("bind", "names"), [
    ("127.0.0.1", {"127.0.0.1"}),
    ("0.0.0.0", set()),  # every address: no name of its own
    ("::", set()),
    ("[::]", set()),
    ("", set()),
    ("192.168.1.5", {"192.168.1.5"}),
    ("[FE80::1]", {"fe80::1"}),
    ("Gateway.LAN", {"gateway.lan"}),
])
def test_the_bind_address_is_a_host_name_unless_it_is_every_address(bind: str, names: set[str]) -> None:
    assert bind_address(bind) == names


@pytest.mark.parametrize(("host", "allowed_hosts", "bind", "served"), [
    ("127.0.0.1:8000", "", "127.0.0.1", True),
    ("localhost", "", "127.0.0.1", True),
    ("[::1]:8000", "", "127.0.0.1", True),
    ("evil.example", "", "127.0.0.1", False),
    ("evil.example:8000", "", "0.0.0.0", False),
    ("192.168.1.5:8000", "", "192.168.1.5", True),
    ("192.168.1.5:8000", "", "0.0.0.0", False),
    ("chat.example.com", "chat.example.com", "127.0.0.1", True),
    ("CHAT.Example.com:443", "Chat.Example.COM", "127.0.0.1", True),
    ("chat.example.com.", "chat.example.com", "127.0.0.1", False),  # the trailing dot is not folded
    ("sub.chat.example.com", "chat.example.com", "127.0.0.1", False),
    ("anything.example", "*", "127.0.0.1", True),
])
def test_host_headers_served_and_refused(host: str, allowed_hosts: str, bind: str, served: bool) -> None:
    refusal = browser_guard(allowed_hosts=allowed_hosts, host=bind)._refusal(host, None, False, True)
    assert (refusal is None) is served
    if not served:
        assert isinstance(refusal, Forbidden) and refusal.code == "host_not_allowed"


@pytest.mark.parametrize(("origin", "listed", "allowed"), [
    ("http://localhost:3000", "", True),
    ("https://127.0.0.1", "", True),
    ("http://[::1]:8080", "", True),
    ("HTTP://LOCALHOST", "", True),  # the scheme and host are compared lowercased
    ("http://app.localhost", "", True),
    ("http://evil.example", "", False),
    ("https://evil.example:8443", "", False),
    ("http://127.0.0.1.nip.io", "", False),
    ("http://localhost.evil.example", "", False),
    ("http://localhost@evil.example", "", False),  # the host is after the userinfo
    ("http:evil.example", "", False),  # no host at all
    ("https://chat.example.com", "https://chat.example.com", True),
    ("https://chat.example.com/", "https://chat.example.com", True),
    ("https://chat.example.com", "https://chat.example.com/", True),
    ("http://chat.example.com", "https://chat.example.com", False),  # another scheme is another origin
    ("https://chat.example.com:8443", "https://chat.example.com", False),
    ("https://Chat.Example.com", "https://chat.example.com", False),  # listed origins match as written
    ("https://anything.example", "*", True),
    # not http(s): desktop apps, the opaque null, unknown schemes pass this check (what they may change is next)
    ("null", "", True),
    ("app://-", "", True),
    ("file://", "", True),
    ("javascript://x", "", True),
    ("ftp://evil.example", "", True),
])
def test_http_origins_are_loopback_or_listed(origin: str, listed: str, allowed: bool) -> None:
    assert browser_guard(cors_origins=listed)._origin_allowed(origin) is allowed


@pytest.mark.parametrize(("origin", "on_the_page", "may"), [
    ("null", False, True),  # some desktop apps send it to the API; a page's POST must still be JSON there
    ("null", True, False),  # sandboxed frames and local files: never on the status page
    (" null ", True, False),
    ("NULL", True, False),  # not the opaque origin: an unknown "scheme", refused everywhere
    ("NULL", False, False),
    ("app://-", True, True),
    ("APP://-", False, True),
    ("file://", False, True),
    ("tauri://localhost", True, True),
    ("vscode-webview://abc", False, True),
    ("chrome-extension://abc", False, True),
    ("moz-extension://abc", False, True),
    ("safari-web-extension://abc", False, True),
    ("capacitor://localhost", False, True),
    ("http://localhost", True, True),
    ("HTTPS://localhost", False, True),
    ("javascript://x", False, False),
    ("data:text/html,x", False, False),
    ("ftp://evil.example", False, False),
    ("electron", False, False),  # no scheme at all
    ("", False, False),
])
def test_which_origins_may_change_things(origin: str, on_the_page: bool, may: bool) -> None:
    assert may_change_things(origin, on_the_page) is may


@pytest.mark.parametrize(("origin", "page_change", "change", "refused"), [
    ("null", False, False, False),
    ("null", False, True, False),
    ("null", True, True, True),
    ("javascript://x", False, False, False),  # an unknown scheme may read
    ("javascript://x", False, True, True),
    ("http://evil.example", False, False, True),  # a foreign page may not even read
    ("http://localhost:3000", True, True, False),
])
def test_an_origins_refusal_depends_on_whether_the_request_changes_something(
    origin: str, page_change: bool, change: bool, refused: bool
) -> None:
    refusal = browser_guard()._refusal("localhost", origin, page_change, change)
    assert (refusal is not None) is refused
    if refused:
        assert isinstance(refusal, Forbidden) and refusal.code == "origin_not_allowed"


@pytest.mark.parametrize(("content_type", "json"), [
    ("application/json", True),
    ("APPLICATION/JSON", True),
    ("application/json; charset=utf-8", True),
    (" application/json ;charset=utf-8", True),
    ("application/vnd.api+json", True),
    ("application/json-patch+json", True),
    ("application/+json", True),  # not a real type, but never one a browser may send unasked
    ("text/json", False),
    ("application/jsonx", False),
    ("application/json, text/plain", False),
    ("text/plain", False),
    ("text/plain; x=application/json", False),
    ("application/x-www-form-urlencoded", False),
    ("multipart/form-data; boundary=x", False),
    ("", False),
])
def test_json_media_types(content_type: str, json: bool) -> None:
    assert is_json(content_type) is json


@pytest.mark.parametrize(("content_type", "authorization", "refused"), [
    ("application/json", "", False),
    (None, "Bearer sk-1", False),  # SDKs upload files as multipart, with their key
    ("multipart/form-data", "bearer sk-1", False),
    ("text/plain", "BEARER sk-1", False),
    ("text/plain", "Bearer ", False),  # the key itself is the key check's business
    (None, "", True),
    ("text/plain", "", True),
    ("text/plain", "Basic dTpw", True),
    ("text/plain", "Bearersk-1", True),
    ("application/x-www-form-urlencoded", "Token sk-1", True),
])
def test_a_post_is_json_or_carries_a_bearer_key(content_type: str | None, authorization: str, refused: bool) -> None:
    refusal = content_type_refusal(content_type, authorization)
    assert content_type_refusal(content_type, authorization, x_api_key="sk-1") is None  # Anthropic's clients' key

    assert (refusal is not None) is refused
    if refused:
        assert isinstance(refusal, InvalidRequest) and refusal.code == "invalid_content_type"


def basic(credentials: str) -> str:
    return base64.b64encode(credentials.encode()).decode()


@pytest.mark.parametrize(("credentials", "password"), [
    (basic("user:sk-1"), "sk-1"),
    (basic(":sk-1"), "sk-1"),
    (basic("user:pass:word"), "pass:word"),  # the password is all after the first colon
    (basic("user:"), ""),
    (basic("sk-1"), ""),  # no colon: no password
    ("not base64!", ""),
    (basic("user:sk-1")[:-1], ""),  # padding cut
    (base64.b64encode(b"user:\xff").decode(), ""),  # not UTF-8
    ("", ""),
])
def test_the_password_of_basic_credentials(credentials: str, password: str) -> None:
    assert basic_password(credentials) == password


@pytest.mark.parametrize(("authorization", "page", "outcome"), [
    ("Bearer sk-1", False, None),
    ("bearer sk-1", False, None),
    ("BEARER   sk-2  ", False, None),
    ("Bearer sk-3", False, "Incorrect API key."),
    ("Bearer sk-1x", False, "Incorrect API key."),
    ("Bearer SK-1", False, "Incorrect API key."),  # keys are case-sensitive
    ("Bearer", False, "Missing"),
    ("Bearer ", False, "Missing"),
    ("sk-1", False, "Missing"),
    ("Token sk-1", False, "Missing"),
    ("", False, "Missing"),
    (f"Basic {basic('me:sk-1')}", False, "Missing"),  # Basic only on the status page
    (f"Basic {basic('me:sk-1')}", True, None),
    (f"basic {basic('me:sk-2')}", True, None),
    (f"Basic {basic('me:sk-3')}", True, "Incorrect API key."),
    (f"Basic {basic('sk-1')}", True, "Missing"),
    ("Bearer sk-1", True, None),
    ({"x-api-key": "sk-1"}, False, None),  # Anthropic's SDKs and Claude Code
    ({"x-api-key": " sk-2 "}, False, None),
    ({"x-api-key": "sk-3"}, False, "Incorrect API key."),
    ({"x-api-key": ""}, False, "Missing"),
    ({"x-api-key": "sk-3", "authorization": "Bearer sk-1"}, False, None),  # the bearer first
    ({"x-api-key": "sk-1", "authorization": "Bearer sk-3"}, False, "Incorrect API key."),
    ({"x-api-key": "sk-1", "authorization": "Token sk-3"}, False, "Missing"),  # another scheme: no key at all
])
def test_the_api_key(authorization: str | dict[str, str], page: bool, outcome: str | None) -> None:
    headers = Headers(authorization if isinstance(authorization, dict) else {"authorization": authorization})
    refusal = admission_guard(api_keys="sk-1, sk-2")._admitted(headers, basic=page)
    if outcome is None:
        assert refusal is EVERYTHING
    else:
        assert isinstance(refusal, AuthenticationFailed) and refusal.message.startswith(outcome)


def test_without_keys_everyone_is_authorised() -> None:
    assert admission_guard()._admitted(Headers({}), basic=False) is EVERYTHING


@pytest.mark.parametrize(("content_length", "refused"), [
    (None, False),
    ("0", False),
    ("4000", False),
    ("4001", True),
    ("00000000000000000000004001", True),
    ("99999999999999999999999999", True),
    # not a plain number: not refused here; the body is bounded while it is read
    ("-1", False),
    (" 5000", False),
    ("1e9", False),
    ("5000, 5000", False),
    ("٣٠٠٠", False),  # HTTP's digits are ASCII: others are not read here (the body is still bounded)
    ("٥٠٠٠", False),
    ("²", False),  # Latin-1 superscripts passed str.isdigit() and then made int() raise
    ("¹", False),
    ("³", False),
])
def test_the_declared_body_size(content_length: str | None, refused: bool) -> None:
    refusal = admission_guard(max_body_bytes=4000)._size_refusal(content_length)
    assert (refusal is not None) is refused


@pytest.mark.parametrize(("path", "page"), [
    ("/", True),
    ("/ui/events", True),
    ("/ui/", True),
    ("/ui", False),  # no route answers there (the router's prefix is /ui/...)
    ("/uix", False),
    ("/UI/events", False),
    ("/v1/chat/completions", False),
    ("", False),
])
def test_which_paths_are_the_status_page(path: str, page: bool) -> None:
    assert for_the_page(path) is page
