"""The review pages hold to the rules REST holds to, against a real `sgam serve` over plain
HTTP form posts (no browser): the episode page shows a key what REST shows it; signing out
ends the session on the server; signed-in requests spend the key's rate budget; bad and
repeated query parameters are clean refusals; notices come from fixed codes; values are
bidi-isolated; error pages carry the security headers, a 405 its Allow; `/ui` redirects
relatively; forgetting says it spans every agent and purpose."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.api.ui_helpers import csrf, post_form, sign_in, signed_in
from tests.integration.api_setup import buffered, ingest, put_fact
from tests.integration.server_helpers import (
    Keys,
    Server,
    episode_body,
    start_server,
    stop_server,
)

pytestmark = pytest.mark.postgres
SINCE = "2026-01-01T00:00:00Z"
SECURITY = ("content-security-policy", "x-frame-options", "x-content-type-options")


def _episode_with_a_candidate_and_a_quarantined_fact(server: Server, keys: Keys) -> str:
    writer = keys("writer")
    (episode_id,) = ingest(
        server, writer, episode_body("I prefer concise answers.", episode_id="ep-review")
    )
    put_fact(
        server,
        writer,
        attribute="employer",
        value="Globex",
        trust="untrusted",
        source_episode_id=episode_id,
        valid_from=SINCE,
    )
    return episode_id


@pytest.mark.parametrize("role", ["reader", "writer"])
def test_the_episode_page_hides_quarantine_and_buffer_from_readers_and_writers(
    server: Server, keys: Keys, role: str
) -> None:
    episode_id = _episode_with_a_candidate_and_a_quarantined_fact(server, keys)
    with signed_in(server, keys(role)) as browser:
        shown = browser.get(f"/ui/episodes/{episode_id}")
    with signed_in(server, keys("reviewer")) as browser:
        reviewed = browser.get(f"/ui/episodes/{episode_id}")

    assert shown.status_code == 200, shown.text
    assert "Globex" not in shown.text  # the quarantined fact
    assert "Candidates it supports" not in shown.text  # the buffer's candidate
    # The reviewer's page of the same episode does show both.
    assert "Globex" in reviewed.text
    assert "Candidates it supports" in reviewed.text


def test_signing_out_ends_the_session_on_the_server(server: Server, keys: Keys) -> None:
    with signed_in(server, keys("reviewer")) as browser:
        cookie = browser.cookies["sgam_ui"]
        assert browser.get("/ui/candidates").status_code == 200
        out = post_form(browser, "/ui/candidates", "/ui/sign-out")
        assert out.status_code == 303
    with server.client() as copy:  # a copy of the cookie saved before signing out
        replayed = copy.get("/ui/candidates", headers={"Cookie": f"sgam_ui={cookie}"})

    assert replayed.status_code == 303
    assert replayed.headers["location"] == "/ui/sign-in"


def test_a_signed_in_user_can_sign_in_with_another_key(server: Server, keys: Keys) -> None:
    with signed_in(server, keys("reader")) as browser:
        again = sign_in(browser, keys("reviewer"))
        candidates = browser.get("/ui/candidates")

    assert again.status_code == 303, again.text
    assert again.headers["location"] == "/ui/candidates"
    assert candidates.status_code == 200
    assert "reviewer key" in candidates.text


@pytest.mark.parametrize("given", ["²", "٣", "0", "-1", "abc", "99999999"])
def test_a_page_number_that_is_not_one_is_a_clean_400(
    server: Server, keys: Keys, given: str
) -> None:
    with signed_in(server, keys("reviewer")) as browser:
        answer = browser.get("/ui/quarantine", params={"page": given})
    assert answer.status_code == 400, answer.text
    assert "page must be a whole number" in answer.text
    assert all(name in answer.headers for name in SECURITY)


def test_a_repeated_query_parameter_is_refused(server: Server, keys: Keys) -> None:
    with signed_in(server, keys("reviewer")) as browser:
        answer = browser.get("/ui/candidates?subject=mira&subject=noor")
    assert answer.status_code == 422
    assert "is given more than once; give it once" in answer.text


def test_quarantine_pages_are_read_in_sql_pages(server: Server, keys: Keys) -> None:
    writer, reviewer = keys("writer"), keys("reviewer")
    for n in range(23):
        put_fact(
            server,
            writer,
            subject=f"p{n:02d}",
            attribute="employer",
            value=f"Firm {n:02d}",
            trust="untrusted",
            valid_from=SINCE,
        )
    with signed_in(server, reviewer) as browser:
        first, second = (browser.get("/ui/quarantine", params={"page": p}) for p in (1, 2))
        # The last page there may be: a read of offset + 21 rows would pass the read's
        # bound (100,000 rows) and be refused; a page read in SQL is just empty.
        last = browser.get("/ui/quarantine", params={"page": 5000})

    def firms(page: str) -> list[str]:
        return re.findall(r"Firm \d\d", page)

    assert firms(first.text) == [f"Firm {n:02d}" for n in range(20)]
    assert firms(second.text) == [f"Firm {n:02d}" for n in range(20, 23)]
    assert 'rel="next"' in first.text
    assert 'rel="next"' not in second.text
    assert last.status_code == 200, last.text[:500]
    assert firms(last.text) == []


def test_a_notice_names_what_was_done_and_no_address_can_write_one(
    server: Server, keys: Keys
) -> None:
    writer, reviewer = keys("writer"), keys("reviewer")
    ingest(server, writer, episode_body("I prefer concise answers.", session_id="chat-1"))
    (waiting,) = buffered(server, reviewer)
    with signed_in(server, reviewer) as browser:
        done = post_form(
            browser, "/ui/candidates", f"/ui/candidates/{waiting['candidate_id']}/confirm"
        )
        shown = browser.get(done.headers["location"])
        crafted = browser.get("/ui/candidates", params={"done": "Your key leaked: call 555"})
        unknown = browser.get("/ui/candidates", params={"notice": "pwned", "what": "x"})

    assert done.status_code == 303
    assert waiting["candidate_id"] in done.headers["location"]  # an id, never a value
    assert "concise" not in done.headers["location"]
    notice = re.search(r'<p class="notice" role="status">(.*?)</p>', shown.text, re.S)
    assert notice is not None
    assert "Confirmed" in notice.group(1)
    assert '<span class="attr">answer_style</span> = <bdi>concise</bdi>' in notice.group(1)
    assert waiting["candidate_id"] not in notice.group(1)
    assert "555" not in crafted.text
    assert 'class="notice"' not in crafted.text + unknown.text


def test_values_are_bidi_isolated_in_tables_and_the_timeline(server: Server, keys: Keys) -> None:
    rtl = "\u05d0\u05de\u05e1\u05d8\u05e8\u05d3\u05dd"  # Amsterdam in Hebrew letters
    put_fact(server, keys("writer"), attribute="home_city", value=rtl, valid_from=SINCE)
    with signed_in(server, keys("reader")) as browser:
        shown = browser.get("/ui/subjects", params={"subject": "mira"})

    assert f'<td data-label="Value"><bdi>{rtl}</bdi></td>' in shown.text
    timeline = shown.text.split('<figure class="timeline">')[1]
    assert f"&#x2068;{rtl}&#x2069;" in timeline  # FSI … PDI in the SVG
    assert f'<li class="believed"><bdi>{rtl}</bdi>' in shown.text


def test_ui_errors_carry_the_security_headers_and_a_405_its_allow(
    server: Server, keys: Keys
) -> None:
    with signed_in(server, keys("reviewer")) as browser:
        missing = browser.get("/ui/no-such-page")
        wrong_method = browser.get("/ui/sign-out")
    with server.client() as anyone:
        signed_out = anyone.get("/ui/candidates")

    for answer in (missing, wrong_method, signed_out):
        assert all(name in answer.headers for name in SECURITY), answer.headers
        assert answer.headers["cache-control"] == "no-store"
    assert missing.status_code == 404
    assert wrong_method.status_code == 405
    assert wrong_method.headers["allow"] == "POST"
    assert "Method not allowed" in wrong_method.text


def test_the_ui_redirect_is_relative_whatever_the_host_header(server: Server) -> None:
    with server.client() as anyone:
        answer = anyone.get("/ui", headers={"Host": "evil.example"})
    assert answer.status_code == 307
    assert answer.headers["location"] == "/ui/"


def test_forgetting_on_the_page_says_it_spans_every_agent_and_purpose(
    server: Server, keys: Keys
) -> None:
    put_fact(server, keys("writer"), attribute="home_city", value="Utrecht", valid_from=SINCE)
    with signed_in(server, keys("admin")) as browser:
        shown = browser.get("/ui/subjects", params={"subject": "mira"})
        form = browser.get("/ui/subjects/mira/forget")
        forgot = browser.post(
            "/ui/subjects/mira/forget", data={"csrf_token": csrf(form), "confirm_subject": "mira"}
        )
        after = browser.get(forgot.headers["location"])

    assert "Forget subject (every agent and purpose)" in shown.text
    assert "for every agent and purpose of tenant" in shown.text
    assert "Forget subject for every agent and purpose" in form.text
    assert "Forgotten: subject <bdi>mira</bdi>, 1 fact hidden." in after.text
    assert "Utrecht" not in after.text


@pytest.fixture
def tight(api_database: str, tmp_path: Path) -> Iterator[Server]:
    """A server whose keys may send 4 requests, refilled once a minute."""
    started = start_server(
        api_database, tmp_path, SGAM_API_RATE_PER_S=str(1 / 60), SGAM_API_RATE_BURST="4"
    )
    yield started
    stop_server(started)


def test_signed_in_requests_spend_the_keys_rate_budget(tight: Server, keys: Keys) -> None:
    reviewer = keys("reviewer")
    with signed_in(tight, reviewer) as browser:
        statuses = [browser.get("/ui/candidates").status_code for _ in range(5)]
    with tight.client(reviewer) as api:
        bearer = api.get("/v1/candidates")

    assert statuses.count(429) >= 1, statuses  # the page shares the key's bucket
    assert statuses[0] == 200
    assert bearer.status_code == 429  # and so does the API with the same key
