"""The review pages in a real browser against a real `sgam serve` on PostgreSQL: a reviewer
confirms, rejects and promotes, an admin forgets, and what they did is seen through the REST
API with the key's id as the actor. Every test ends with a screenshot in build/screenshots."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.integration.api_setup import (
    buffered,
    facts_of,
    ingest,
    key_id,
    log_of,
    put_fact,
    quarantine_of,
)
from tests.integration.browser_helpers import docs_screenshot, screenshot, sign_in
from tests.integration.server_helpers import Keys, Server, episode_body

pytestmark = [pytest.mark.browser, pytest.mark.postgres]
SIGN_IN = re.compile(r".*/ui/sign-in$")


def test_sign_in_sets_a_strict_http_only_cookie_and_sign_out_ends_it(
    page: Page, keys: Keys
) -> None:
    page.goto("/ui/candidates")
    expect(page).to_have_url(SIGN_IN)  # signed out: sent here
    page.get_by_label("API key").fill("sgam_0000000000000000_" + "x" * 43)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("not valid")

    reviewer = keys("reviewer")
    sign_in(page, reviewer)
    expect(page.get_by_role("heading", name="Candidates", level=1)).to_be_visible()
    session = next(c for c in page.context.cookies() if c["name"] == "sgam_ui")
    assert session["httpOnly"] is True
    assert session["sameSite"] == "Strict"
    assert session["secure"] is False  # plain HTTP here; Secure is set behind HTTPS
    assert reviewer not in session["value"]  # the cookie names the key, never its secret
    screenshot(page, "signed-in")

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    page.goto("/ui/candidates")
    expect(page).to_have_url(SIGN_IN)


def test_confirming_a_candidate_makes_it_a_fact_with_the_key_as_actor(
    page: Page, server: Server, keys: Keys
) -> None:
    writer, reviewer = keys("writer"), keys("reviewer")
    ingest(server, writer, episode_body("I prefer concise answers.", session_id="chat-1"))
    sign_in(page, reviewer)
    card = page.get_by_role("article").filter(has_text="answer_style")
    expect(card).to_contain_text("2 sessions within 30 days")
    expect(card).to_contain_text("1 of 2")
    expect(card.locator("mark")).to_have_text("I prefer concise answers.")  # the evidence
    screenshot(page, "candidates-before-confirm")
    docs_screenshot(page, "review-candidates")

    card.get_by_role("button", name="Confirm").click()
    expect(page.get_by_role("status")).to_have_text(
        "Confirmed: answer_style = concise (subject mira)."
    )
    expect(page.get_by_text("No candidate waits")).to_be_visible()

    with server.client(reviewer) as api:
        facts = api.get("/v1/subjects/mira/facts", params={"attribute": "answer_style"}).json()
    # A reviewer confirms on the page: the fact is verified, as a promotion is, not the user's.
    assert [(f["value"], f["trust"]) for f in facts] == [("concise", "verified")]
    confirmed = [e for e in log_of(server, reviewer) if e["kind"] == "candidate_confirmed"]
    assert [e["actor"] for e in confirmed] == [key_id(reviewer)]


def test_rejecting_a_candidate_drops_it(page: Page, server: Server, keys: Keys) -> None:
    writer, reviewer = keys("writer"), keys("reviewer")
    ingest(server, writer, episode_body("Please contact me by email.", session_id="chat-1"))
    (waiting,) = buffered(server, reviewer)
    assert waiting["attribute"] == "contact_channel"
    sign_in(page, reviewer)
    card = page.get_by_role("article").filter(has_text="contact_channel")
    expect(card).to_contain_text("waits for a confirmation")
    card.get_by_role("button", name="Reject").click()
    expect(page.get_by_role("status")).to_have_text(
        "Rejected: contact_channel = email (subject mira)."
    )
    assert buffered(server, reviewer) == []
    with server.client(reviewer) as api:
        rejected = api.get("/v1/candidates", params={"status": "rejected"}).json()
        facts = api.get("/v1/subjects/mira/facts").json()
    assert [c["candidate_id"] for c in rejected] == [waiting["candidate_id"]]
    assert facts == []
    rejections = [e for e in log_of(server, reviewer) if e["kind"] == "candidate_rejected"]
    assert [e["actor"] for e in rejections] == [key_id(reviewer)]


def _sent_by(card: Locator, button: str) -> tuple[str, dict[str, str]]:
    """Where the card's form of `button` posts, and its hidden fields."""
    form = card.locator("form").filter(has=card.page.get_by_role("button", name=button))
    action = form.get_attribute("action")
    assert action is not None
    hidden = form.locator("input[type=hidden]")
    fields = {
        hidden.nth(n).get_attribute("name") or "": hidden.nth(n).get_attribute("value") or ""
        for n in range(hidden.count())
    }
    assert set(fields) == {"csrf_token", "idempotency_key"}
    return action, fields


def _keys_drawn(card: Locator) -> list[str]:
    drawn = card.locator("input[name=idempotency_key]")
    expect(drawn).to_have_count(2)  # both buttons, a key each
    keys_drawn = [drawn.nth(n).get_attribute("value") or "" for n in range(2)]
    assert len(set(keys_drawn)) == 2
    assert all(re.fullmatch(r"ui-[0-9a-f]{32}", drawn_key) for drawn_key in keys_drawn)
    return keys_drawn


def _sent_again(page: Page, action: str, fields: dict[str, str], notice: str) -> None:
    """The same form once more is answered as the first was; without its key it is 409."""
    again = page.request.post(action, form=fields)
    assert again.ok, again.status
    page.goto(again.url)  # where it sent the browser back to: the first answer's notice
    expect(page.get_by_role("status")).to_have_text(notice)
    unkeyed = page.request.post(action, form={"csrf_token": fields["csrf_token"]})
    assert unkeyed.status == 409  # no key: a second decision of what is decided already


def test_a_decision_sent_twice_from_one_button_is_decided_once(
    page: Page, server: Server, keys: Keys
) -> None:
    """Each button carries an Idempotency-Key of its own, drawn with the page: the same form
    sent again (a double click, a resend) answers the first decision again; without its key a
    second confirm is refused, the candidate decided already."""
    writer, reviewer = keys("writer"), keys("reviewer")
    ingest(server, writer, episode_body("Please contact me by email.", session_id="chat-1"))
    sign_in(page, reviewer)
    card = page.get_by_role("article").filter(has_text="contact_channel")
    first = _keys_drawn(card)
    page.reload()
    assert not set(first) & set(_keys_drawn(card))  # a page drawn again: new keys
    action, fields = _sent_by(card, "Confirm")

    card.get_by_role("button", name="Confirm").click()
    notice = "Confirmed: contact_channel = email (subject mira)."
    expect(page.get_by_role("status")).to_have_text(notice)
    _sent_again(page, action, fields, notice)

    confirmed = [e for e in log_of(server, reviewer) if e["kind"] == "candidate_confirmed"]
    assert [e["actor"] for e in confirmed] == [key_id(reviewer)]  # decided once
    with server.client(reviewer) as api:
        facts = api.get("/v1/subjects/mira/facts").json()
    assert [f["value"] for f in facts] == ["email"]
    screenshot(page, "candidate-confirmed-once")


def test_a_promotion_sent_twice_from_one_button_is_made_once(
    page: Page, server: Server, keys: Keys
) -> None:
    writer, reviewer = keys("writer"), keys("reviewer")
    ingest(server, writer, episode_body("my home city is Utrecht", source="tool_result"))
    sign_in(page, reviewer)
    page.get_by_role("link", name="Quarantine").click()
    card = page.get_by_role("article").filter(has_text="home_city")
    _keys_drawn(card)
    action, fields = _sent_by(card, "Promote")

    card.get_by_role("button", name="Promote").click()
    notice = "Promoted: home_city = Utrecht (subject mira)."
    expect(page.get_by_role("status")).to_have_text(notice)
    _sent_again(page, action, fields, notice)

    promotions = [e for e in log_of(server, reviewer) if e["kind"] == "promote"]
    assert [e["actor"] for e in promotions] == [key_id(reviewer)]  # promoted once


def test_promoting_a_quarantined_fact_releases_it(page: Page, server: Server, keys: Keys) -> None:
    writer, reviewer = keys("writer"), keys("reviewer")
    (episode_id,) = ingest(
        server, writer, episode_body("my home city is Utrecht", source="tool_result")
    )
    sign_in(page, reviewer)
    page.get_by_role("link", name="Quarantine").click()
    card = page.get_by_role("article").filter(has_text="home_city")
    expect(card).to_contain_text("untrusted")
    expect(card.get_by_role("link", name=episode_id)).to_be_visible()  # the source episode
    expect(card.locator("mark")).to_have_text("my home city is Utrecht")
    screenshot(page, "quarantine")
    card.get_by_role("button", name="Promote").click()
    expect(page.get_by_role("status")).to_have_text("Promoted: home_city = Utrecht (subject mira).")
    expect(page.get_by_text("Nothing is quarantined")).to_be_visible()

    with server.client(reviewer) as api:
        facts = api.get("/v1/subjects/mira/facts", params={"attribute": "home_city"}).json()
    assert [(f["value"], f["status"]) for f in facts] == [("Utrecht", "active")]
    promotions = [e for e in log_of(server, reviewer) if e["kind"] == "promote"]
    assert [e["actor"] for e in promotions] == [key_id(reviewer)]


def test_an_admin_forgets_a_subject_after_typing_its_name(
    page: Page, server: Server, keys: Keys
) -> None:
    admin = keys("admin")
    put_fact(
        server, admin, attribute="home_city", value="Utrecht", valid_from="2026-01-01T00:00:00Z"
    )
    sign_in(page, admin)
    page.get_by_role("link", name="Subjects").click()
    page.get_by_role("link", name="mira", exact=True).click()
    expect(page.get_by_role("cell", name="Utrecht")).to_be_visible()
    page.get_by_role("link", name="Forget subject").click()

    page.get_by_label("Type the subject's name to confirm").fill("mirra")
    page.get_by_role("button", name="Forget subject").click()
    expect(page.get_by_role("alert")).to_contain_text("nothing was forgotten")
    assert [f["value"] for f in facts_of(server, admin)] == ["Utrecht"]  # the typo changed nothing

    page.get_by_label("Type the subject's name to confirm").fill("mira")
    screenshot(page, "forget-confirmation")
    page.get_by_role("button", name="Forget subject").click()
    expect(page.get_by_role("status")).to_have_text("Forgotten: subject mira, 1 fact hidden.")
    expect(page.get_by_text("Nothing holds now for mira")).to_be_visible()
    assert facts_of(server, admin) == []
    forgets = [e for e in log_of(server, admin) if e["kind"] == "forget"]
    assert [e["actor"] for e in forgets] == [key_id(admin)]


def test_rejecting_a_quarantined_fact_dismisses_it_for_good(
    page: Page, server: Server, keys: Keys
) -> None:
    writer, reviewer = keys("writer"), keys("reviewer")
    ingest(server, writer, episode_body("my home city is Utrecht", source="tool_result"))
    (held_back,) = quarantine_of(server, reviewer)
    sign_in(page, reviewer)
    page.get_by_role("link", name="Quarantine").click()
    page.get_by_role("article").filter(has_text="home_city").get_by_role(
        "button", name="Reject"
    ).click()
    expect(page.get_by_role("status")).to_have_text("Rejected: home_city = Utrecht (subject mira).")
    expect(page.get_by_text("Nothing is quarantined")).to_be_visible()
    assert quarantine_of(server, reviewer) == []
    assert facts_of(server, reviewer) == []
    with server.client(reviewer) as api:
        promoted = api.post(f"/v1/facts/{held_back['fact_id']}/promote")
    assert promoted.status_code == 404  # dismissed for good: nothing left to promote
    dismissals = [e for e in log_of(server, reviewer) if e["kind"] == "dismiss"]
    assert [(e["actor"], e["fact_ids"]) for e in dismissals] == [
        (key_id(reviewer), [held_back["fact_id"]])
    ]
