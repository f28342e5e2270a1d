"""The review pages' cookies over plain HTTP and behind an HTTPS proxy (X-Forwarded-Proto from
loopback, which uvicorn trusts): Secure only in the second case, HttpOnly and SameSite=Strict
always; and a sign-in form posted without its token is refused."""

from __future__ import annotations

import re

import pytest

from tests.integration.server_helpers import Keys, Server

pytestmark = pytest.mark.postgres


def sign_in(server: Server, secret: str, headers: dict[str, str]) -> tuple[str, str]:
    """The Set-Cookie headers of the sign-in form and of a successful sign-in."""
    with server.client() as browser:
        form = browser.get("/ui/sign-in", headers=headers)
        assert form.status_code == 200
        nonce_header = form.headers["set-cookie"]
        nonce = re.search(r"sgam_ui_nonce=([^;]+)", nonce_header)
        token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
        assert nonce is not None
        assert token is not None
        answer = browser.post(
            "/ui/sign-in",
            data={"csrf_token": token.group(1), "api_key": secret},
            headers=headers | {"Cookie": f"sgam_ui_nonce={nonce.group(1)}"},
        )
    assert answer.status_code == 303, answer.text
    session_header = next(
        value
        for name, value in answer.headers.multi_items()
        if name == "set-cookie" and value.startswith("sgam_ui=")
    )
    return nonce_header, session_header


@pytest.mark.parametrize(
    ("headers", "secure"), [({}, False), ({"X-Forwarded-Proto": "https"}, True)]
)
def test_cookies_are_strict_http_only_and_secure_behind_https(
    server: Server, keys: Keys, headers: dict[str, str], secure: bool
) -> None:
    for cookie in sign_in(server, keys("reviewer"), headers):
        flags = {part.strip().lower() for part in cookie.split(";")[1:]}
        assert "httponly" in flags
        assert "samesite=strict" in flags
        assert "path=/ui" in flags
        assert ("secure" in flags) is secure, cookie


def test_a_sign_in_without_its_token_is_refused(server: Server, keys: Keys) -> None:
    with server.client() as browser:
        answer = browser.post("/ui/sign-in", data={"api_key": keys("admin")})
    assert answer.status_code == 403
    assert "sgam_ui=" not in answer.headers.get("set-cookie", "")
