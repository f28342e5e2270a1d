"""Driving the review pages with plain HTTP (no browser): fetch a form for its CSRF token,
post it, keep the cookies."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import httpx2

from tests.integration.server_helpers import Server

TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


def csrf(page: httpx2.Response) -> str:
    found = TOKEN.search(page.text)
    assert found is not None, page.text[:500]
    return found.group(1)


def sign_in(browser: httpx2.Client, secret: str) -> httpx2.Response:
    form = browser.get("/ui/sign-in")
    assert form.status_code == 200, form.text[:500]
    return browser.post("/ui/sign-in", data={"csrf_token": csrf(form), "api_key": secret})


@contextmanager
def signed_in(server: Server, secret: str) -> Iterator[httpx2.Client]:
    """A client with a session of `secret`'s key."""
    with server.client() as browser:
        answer = sign_in(browser, secret)
        assert answer.status_code == 303, answer.text[:500]
        assert "refused" not in answer.headers["location"]
        yield browser


def post_form(browser: httpx2.Client, page: str, action: str, **fields: str) -> httpx2.Response:
    """Post the form `action` as the page `page` offers it (with that page's token)."""
    shown = browser.get(page)
    assert shown.status_code == 200, shown.text[:500]
    return browser.post(action, data={"csrf_token": csrf(shown)} | fields)
