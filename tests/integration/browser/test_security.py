"""What the review pages refuse, in a real browser: a reader gets no review buttons and a POST
anyway is 403; another tenant's ids are the same 404 page as missing ones; a form without its
CSRF token is refused; the pages forbid framing and carry no script."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import Page, expect

from tests.integration.api_setup import buffered, facts_of, ingest, put_fact, quarantine_of
from tests.integration.browser_helpers import csrf_of, screenshot, sign_in
from tests.integration.server_helpers import Keys, Server, episode_body

pytestmark = [pytest.mark.browser, pytest.mark.postgres]


def test_a_reader_sees_no_review_buttons_and_a_post_anyway_is_403(
    page: Page, server: Server, keys: Keys
) -> None:
    writer, reviewer, reader = keys("writer"), keys("reviewer"), keys("reader")
    ingest(server, writer, episode_body("I prefer concise answers.", session_id="chat-1"))
    ingest(server, writer, episode_body("my employer is Globex", source="tool_result"))
    put_fact(
        server, writer, attribute="home_city", value="Utrecht", valid_from="2026-01-01T00:00:00Z"
    )
    (candidate,) = buffered(server, reviewer)
    (held_back,) = quarantine_of(server, reviewer)
    sign_in(page, reader)

    expect(page.get_by_role("heading", name="Subjects", level=1)).to_be_visible()
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Subjects")).to_be_visible()
    expect(nav.get_by_role("link", name="Candidates")).to_have_count(0)
    expect(nav.get_by_role("link", name="Quarantine")).to_have_count(0)
    page.get_by_role("link", name="mira", exact=True).click()  # from the Subjects list
    expect(page.get_by_role("cell", name="Utrecht")).to_be_visible()
    for name in ("Confirm", "Reject", "Promote", "Forget subject"):
        expect(page.get_by_role("button", name=name)).to_have_count(0)
        expect(page.get_by_role("link", name=name)).to_have_count(0)
    screenshot(page, "reader-subjects")

    token = csrf_of(page)  # a valid token of the reader's own session: only the role is wrong
    for path in (
        f"/ui/candidates/{candidate['candidate_id']}/confirm",
        "/ui/subjects/mira/forget",
    ):
        answer = page.request.post(path, form={"csrf_token": token, "confirm_subject": "mira"})
        assert answer.status == 403, (path, answer.status)
    assert page.request.get("/ui/candidates").status == 403
    page.goto("/ui/quarantine")
    expect(page.get_by_role("heading", level=1)).to_have_text("The key's role does not allow this")
    assert [c["status"] for c in buffered(server, reviewer)] == ["buffered"]  # nothing decided
    assert [f["fact_id"] for f in quarantine_of(server, reviewer)] == [held_back["fact_id"]]
    assert [f["value"] for f in facts_of(server, reader)] == ["Utrecht"]  # nothing forgotten


def test_another_tenants_ids_are_the_same_404_as_missing_ones(
    page: Page, server: Server, keys: Keys
) -> None:
    other = keys("admin", tenant_id=f"other-{uuid.uuid4().hex[:12]}")  # a second tenant
    (theirs,) = ingest(server, other, episode_body("I prefer concise answers.", session_id="x"))
    (their_candidate,) = buffered(server, other)
    admin = keys("admin")
    sign_in(page, admin)

    missing = page.goto("/ui/episodes/no-such-episode")
    assert missing is not None
    assert missing.status == 404
    missing_page = page.locator("main").inner_text()
    foreign = page.goto(f"/ui/episodes/{theirs}")
    assert foreign is not None
    assert foreign.status == 404
    assert page.locator("main").inner_text() == missing_page
    expect(page.get_by_role("heading", level=1)).to_have_text("Not found")
    screenshot(page, "cross-tenant-404")

    token = csrf_of(page)
    decided = page.request.post(
        f"/ui/candidates/{their_candidate['candidate_id']}/confirm", form={"csrf_token": token}
    )
    nothing = page.request.post(
        "/ui/candidates/no-such-candidate/confirm", form={"csrf_token": token}
    )
    assert decided.status == nothing.status == 404
    assert decided.text() == nothing.text()
    assert [c["status"] for c in buffered(server, other)] == ["buffered"]


def test_a_form_without_its_csrf_token_is_refused(page: Page, server: Server, keys: Keys) -> None:
    writer, reviewer = keys("writer"), keys("reviewer")
    ingest(server, writer, episode_body("I prefer concise answers.", session_id="chat-1"))
    (candidate,) = buffered(server, reviewer)
    sign_in(page, reviewer)
    confirm = f"/ui/candidates/{candidate['candidate_id']}/confirm"

    without = page.request.post(confirm, form={"note": "no token"})
    forged = page.request.post(confirm, form={"csrf_token": "forged"})
    assert without.status == forged.status == 403
    assert "CSRF" in without.text()
    assert [c["status"] for c in buffered(server, reviewer)] == ["buffered"]

    # The page's own form, with its token, still works: only the token was missing.
    page.get_by_role("article").filter(has_text="answer_style").get_by_role(
        "button", name="Confirm"
    ).click()
    expect(page.get_by_role("status")).to_contain_text("Confirmed: answer_style = concise")
    assert buffered(server, reviewer) == []


def test_pages_forbid_framing_and_allow_no_inline_script(page: Page, keys: Keys) -> None:
    for path in ("/ui/sign-in", "/ui/episodes/missing"):
        answer = page.goto(path)
        assert answer is not None
        headers = answer.headers
        policy = headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy
        assert "unsafe-inline" not in policy
        assert "script-src" not in policy
        assert policy.startswith("default-src 'none'")
        assert headers["x-frame-options"] == "DENY"
    sign_in(page, keys("reviewer"))
    assert page.locator("script").count() == 0
    # The policy holds in the browser too: an injected inline script does not run.
    page.evaluate(
        "() => { const s = document.createElement('script');"
        " s.textContent = 'document.body.dataset.ran = 1'; document.body.append(s); }"
    )
    assert page.evaluate("() => document.body.dataset.ran") is None
