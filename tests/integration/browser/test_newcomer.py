"""The review pages as a newcomer meets them, in a real browser: a Subjects list to start from
(search by the name's start, paged), timelines in valid-time order with a legend, the episode
page in words, one timestamp format, and every page readable on a 420 px screen. The pictures
in docs/ are taken here."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.integration.api_setup import ingest, put_fact
from tests.integration.browser_helpers import docs_screenshot, screenshot, sign_in
from tests.integration.server_helpers import Keys, Server, episode_body

pytestmark = [pytest.mark.browser, pytest.mark.postgres]
NARROW = {"width": 420, "height": 900}
STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d UTC$")  # the pages' one format


def _subjects(server: Server, secret: str, names: list[str]) -> None:
    for name in names:
        put_fact(
            server,
            secret,
            subject=name,
            attribute="home_city",
            value="Utrecht",
            valid_from="2026-01-01T00:00:00Z",
        )


def test_the_subjects_list_is_searched_by_prefix_and_paged(
    page: Page, server: Server, keys: Keys
) -> None:
    writer, reader = keys("writer"), keys("reader")
    _subjects(server, writer, [f"c{n:02d}" for n in range(22)] + ["mira", "milan"])
    sign_in(page, reader)
    page.get_by_role("link", name="Subjects").click()

    rows = page.get_by_role("table").locator("tbody tr")
    expect(rows).to_have_count(20)
    expect(rows.first).to_contain_text("c00")
    expect(rows.first.locator("td").last).to_have_text(STAMP)
    page.get_by_role("link", name="Next page").click()
    expect(rows).to_have_count(4)
    assert rows.locator("th").all_inner_texts() == ["c20", "c21", "milan", "mira"]

    page.get_by_label("Name starts with").fill("mi")
    page.get_by_role("button", name="Find").click()
    expect(rows).to_have_count(2)
    assert rows.locator("th").all_inner_texts() == ["milan", "mira"]
    docs_screenshot(page, "review-subjects")
    page.get_by_role("link", name="mira", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Subject mira")

    page.goto("/ui/subjects?q=zz")
    expect(page.get_by_text("No subject starts with zz.")).to_be_visible()


def test_a_new_tenant_is_told_how_subjects_appear(page: Page, keys: Keys) -> None:
    sign_in(page, keys("reader"))
    page.get_by_role("link", name="Subjects").click()
    expect(page.get_by_text("No fact is stored yet")).to_be_visible()


def test_timelines_run_in_valid_time_order_with_a_legend(
    page: Page, server: Server, keys: Keys
) -> None:
    writer, reader = keys("writer"), keys("reader")
    # Recorded in the other order: Lisbon (from March) first, then the earlier Utrecht.
    put_fact(
        server, writer, attribute="home_city", value="Lisbon", valid_from="2026-03-01T00:00:00Z"
    )
    put_fact(
        server,
        writer,
        attribute="home_city",
        value="Utrecht",
        valid_from="2026-01-01T00:00:00Z",
        valid_to="2026-03-01T00:00:00Z",
    )
    sign_in(page, reader)
    page.goto("/ui/subjects?subject=mira")

    legend = page.get_by_role("list", name="How to read the timelines")
    for meaning in ("believed", "hatched: superseded", "now", "when the version was recorded"):
        expect(legend).to_contain_text(meaning)
    figure = page.get_by_role("figure").filter(has_text="home_city")
    labels = figure.locator("ol.versions li").all_inner_texts()
    assert [label.split(" — ")[0] for label in labels] == ["Utrecht", "Lisbon"]
    assert all("recorded 2026-" in label and label.count(" UTC") >= 2 for label in labels)
    expect(figure.locator("svg path.recorded")).to_have_count(2)  # a mark per version
    expect(figure.locator("svg line.now")).to_have_count(1)
    screenshot(page, "timeline-valid-order")


def test_the_episode_page_says_source_and_trust_in_words(
    page: Page, server: Server, keys: Keys
) -> None:
    writer, reviewer = keys("writer"), keys("reviewer")
    (episode_id,) = ingest(
        server, writer, episode_body("my home city is Utrecht", source="tool_result")
    )
    sign_in(page, reviewer)
    page.goto(f"/ui/episodes/{episode_id}")
    facts = page.locator("main dl")
    expect(facts).to_contain_text("a tool's result")
    expect(facts).to_contain_text("untrusted — quarantined until a reviewer promotes it")
    expect(facts).to_contain_text("(its source's default)")
    occurred = facts.locator("dt:has-text('Occurred') + dd")
    expect(occurred).to_have_text(STAMP)
    expect(page.get_by_role("heading", name="Model usage")).to_have_count(0)  # not an admin
    screenshot(page, "episode-in-words")


def test_every_page_is_readable_at_420_px(browser: Browser, server: Server, keys: Keys) -> None:
    writer, admin = keys("writer"), keys("admin")
    (episode_id,) = ingest(
        server, writer, episode_body("I prefer concise answers.", session_id="chat-1")
    )
    long_value = "Llanfairpwllgwyngyllgogerychwyrndrobwllllantysiliogogogoch" * 2
    put_fact(
        server, writer, attribute="home_city", value=long_value, valid_from="2026-01-01T00:00:00Z"
    )
    context = browser.new_context(base_url=server.url, viewport=NARROW)
    try:
        page = context.new_page()
        sign_in(page, admin)
        for name, path in (
            ("subjects", "/ui/subjects"),
            ("subject", "/ui/subjects?subject=mira"),
            ("episode", f"/ui/episodes/{episode_id}"),
            ("candidates", "/ui/candidates"),
            ("quarantine", "/ui/quarantine"),
        ):
            page.goto(path)
            width = page.evaluate("() => document.documentElement.scrollWidth")
            assert width <= NARROW["width"], (name, width)  # long values wrap, nothing scrolls
            screenshot(page, f"narrow-{name}")
        page.goto("/ui/subjects?subject=mira")
        docs_screenshot(page, "review-narrow-subject")
    finally:
        context.close()
