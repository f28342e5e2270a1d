"""The review pages' sign-in form spends the same per-address budget of refused keys as the
API's bearer keys, against a real `sgam serve` (plain HTTP form posts, no browser): wrong keys
on the form are refused until the budget is spent, then 429 with Retry-After before any key is
looked up — on the form and on the API alike."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx2
import pytest
import redis

from tests.integration.server_helpers import REDIS_URL, Keys, Server, start_server, stop_server

pytestmark = pytest.mark.postgres

BURST = 3
WRONG = "sgam_0000000000000000_" + "x" * 43  # well formed, unknown: a database lookup


@pytest.fixture(scope="module")
def server(api_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # One refused key back every 50 s: nothing refills while a test runs.
    started = start_server(
        api_database,
        tmp_path_factory.mktemp("budget"),
        SGAM_API_RATE_PER_S="0.02",
        SGAM_API_RATE_BURST=str(BURST),
    )
    yield started
    stop_server(started)


@pytest.fixture(autouse=True)
def fresh_budget() -> None:
    """This address's budget full again (the test's own Redis db)."""
    client = redis.Redis.from_url(REDIS_URL)
    client.delete("sgam:rate:refused:127.0.0.1")
    client.close()


def _sign_in(browser: httpx2.Client, secret: str) -> httpx2.Response:
    """Fetch the form (its nonce cookie and CSRF token) and post `secret` with it."""
    form = browser.get("/ui/sign-in")
    assert form.status_code == 200
    token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
    assert token is not None
    return browser.post("/ui/sign-in", data={"csrf_token": token.group(1), "api_key": secret})


def _spent(answer: httpx2.Response) -> None:
    assert answer.status_code == 429, answer.text
    assert int(answer.headers["Retry-After"]) >= 1


def test_wrong_keys_on_the_form_spend_the_budget_then_429_on_the_form_and_the_api(
    server: Server, keys: Keys
) -> None:
    with server.client() as browser:
        refused = [_sign_in(browser, WRONG) for _ in range(BURST)]
        spent = _sign_in(browser, WRONG)
    with server.client(WRONG) as api:
        bearer = api.get("/v1/usage")

    for answer in refused:
        assert answer.status_code == 303
        assert answer.headers["location"] == "/ui/sign-in?refused=unknown"
    _spent(spent)
    assert "Too many requests" in spent.text  # a page, not a problem document
    assert "sgam_ui=" not in spent.headers.get("set-cookie", "")
    _spent(bearer)
    assert bearer.json()["type"] == "urn:sgam:problem:rate-limited"


def test_wrong_bearer_keys_spend_the_forms_budget_too(server: Server, keys: Keys) -> None:
    with server.client(WRONG) as api:
        statuses = [api.get("/v1/usage").status_code for _ in range(BURST)]
    with server.client() as browser:
        spent = _sign_in(browser, WRONG)
    assert statuses == [401] * BURST
    _spent(spent)


def test_a_key_accepted_before_still_signs_in_when_the_budget_is_spent(
    server: Server, keys: Keys
) -> None:
    secret = keys("reviewer")
    with server.client() as browser:
        assert _sign_in(browser, secret).status_code == 303  # accepted: vouched for
    with server.client() as browser:
        for _ in range(BURST):
            _sign_in(browser, WRONG)
        _spent(_sign_in(browser, WRONG))
    with server.client() as browser:
        again = _sign_in(browser, secret)
    assert (again.status_code, again.headers["location"]) == (303, "/ui/candidates")
    assert "sgam_ui=" in again.headers.get("set-cookie", "")
