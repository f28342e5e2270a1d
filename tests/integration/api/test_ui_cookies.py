"""The review pages' cookies over plain HTTP and behind an HTTPS proxy: HttpOnly and
SameSite=Strict always; over HTTPS Secure with the `__Host-` prefix (Path=/, no Domain), so no
other host or path can plant one. X-Forwarded-Proto is believed only from a proxy that
SGAM_FORWARDED_ALLOW_IPS names (default none). A sign-in form posted without its token is
refused."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.integration.server_helpers import Keys, Server, start_server, stop_server

pytestmark = pytest.mark.postgres
HTTPS = {"X-Forwarded-Proto": "https"}


@pytest.fixture(scope="module")
def proxied(api_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server behind a proxy on loopback, which it is told to believe."""
    started = start_server(
        api_database, tmp_path_factory.mktemp("proxied"), SGAM_FORWARDED_ALLOW_IPS="127.0.0.1"
    )
    yield started
    stop_server(started)


def sign_in(server: Server, secret: str, headers: dict[str, str]) -> tuple[str, str]:
    """The Set-Cookie headers of the sign-in form and of a successful sign-in."""
    with server.client() as browser:
        form = browser.get("/ui/sign-in", headers=headers)
        assert form.status_code == 200
        nonce_header = form.headers["set-cookie"]
        nonce = re.search(r"^([^=]+)=([^;]+)", nonce_header)
        token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
        assert nonce is not None
        assert token is not None
        answer = browser.post(
            "/ui/sign-in",
            data={"csrf_token": token.group(1), "api_key": secret},
            headers=headers | {"Cookie": f"{nonce.group(1)}={nonce.group(2)}"},
        )
    assert answer.status_code == 303, answer.text
    session_header = next(
        value
        for name, value in answer.headers.multi_items()
        if name == "set-cookie" and re.match(r"(__Host-)?sgam_ui=", value)
    )
    return nonce_header, session_header


def _flags(cookie: str) -> set[str]:
    return {part.strip().lower() for part in cookie.split(";")[1:]}


def test_over_plain_http_the_cookies_are_strict_http_only_and_scoped_to_ui(
    server: Server, keys: Keys
) -> None:
    for cookie in sign_in(server, keys("reviewer"), {}):
        assert cookie.startswith("sgam_ui")
        assert {"httponly", "samesite=strict", "path=/ui"} <= _flags(cookie)
        assert "secure" not in _flags(cookie), cookie


def test_behind_a_named_https_proxy_the_cookies_are_secure_host_cookies(
    proxied: Server, keys: Keys
) -> None:
    for cookie in sign_in(proxied, keys("reviewer"), HTTPS):
        assert cookie.startswith("__Host-sgam_ui"), cookie
        assert {"httponly", "samesite=strict", "path=/", "secure"} <= _flags(cookie)
        assert not any(flag.startswith("domain=") for flag in _flags(cookie))


def test_x_forwarded_proto_from_a_proxy_not_named_is_not_believed(
    server: Server, keys: Keys
) -> None:
    # The default names no proxy: a client on loopback claiming HTTPS gets plain cookies.
    for cookie in sign_in(server, keys("reviewer"), HTTPS):
        assert cookie.startswith("sgam_ui"), cookie
        assert "secure" not in _flags(cookie)


def test_a_sign_in_without_its_token_is_refused(server: Server, keys: Keys) -> None:
    with server.client() as browser:
        answer = browser.post("/ui/sign-in", data={"api_key": keys("admin")})
    assert answer.status_code == 403
    assert "sgam_ui=" not in answer.headers.get("set-cookie", "")
