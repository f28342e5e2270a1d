"""A subject's page, an episode's page, and using the pages by keyboard, on a phone-sized
screen and across pages of a long list — in a real browser."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.integration.api_setup import ingest, put_home_cities
from tests.integration.browser_helpers import docs_screenshot, screenshot, sign_in
from tests.integration.server_helpers import Keys, Server, episode_body

pytestmark = [pytest.mark.browser, pytest.mark.postgres]
PHONE = {"width": 390, "height": 844}


def show_subject(page: Page, subject: str) -> None:
    """From the Subjects list, as a newcomer finds one: search by the name's start, pick it."""
    page.get_by_role("link", name="Subjects").click()
    page.get_by_label("Name starts with").fill(subject[:2])
    page.get_by_role("button", name="Find").click()
    page.get_by_role("link", name=subject, exact=True).click()


def test_the_timeline_shows_a_superseded_value_and_its_successor(
    page: Page, server: Server, keys: Keys
) -> None:
    writer, reviewer = keys("writer"), keys("reviewer")
    put_home_cities(server, writer, ("Utrecht", "2026-01-01"), ("Lisbon", "2026-03-01"))
    sign_in(page, reviewer)
    show_subject(page, "mira")

    expect(page.get_by_role("row").filter(has_text="home_city")).to_contain_text("Lisbon")
    figure = page.get_by_role("figure").filter(has_text="home_city")
    picture = figure.get_by_role("img", name="Timeline of home_city: 3 recorded versions")
    expect(picture).to_be_visible()
    # Utrecht was first recorded open-ended, then that version was superseded by a closed
    # one ending where Lisbon begins.
    superseded = figure.locator("svg g.superseded")
    believed = figure.locator("svg g.believed")
    expect(superseded).to_have_count(1)
    # Values sit between bidi isolates (FSI … PDI) in the SVG.
    expect(superseded.locator("title")).to_have_text(
        re.compile("^\u2068Utrecht\u2069: valid 2026-01-01 00:00 UTC – now; recorded ")
    )
    expect(believed).to_have_count(2)
    expect(believed.nth(0).locator("title")).to_contain_text(
        "Utrecht\u2069: valid 2026-01-01 00:00 UTC – 2026-03-01 00:00 UTC"
    )
    expect(believed.nth(1).locator("title")).to_contain_text(
        "Lisbon\u2069: valid 2026-03-01 00:00 UTC – now"
    )
    # The successor's bar starts where the closed version's bar ends.
    closed = believed.nth(0).locator("rect")
    successor = believed.nth(1).locator("rect")
    end = float(closed.get_attribute("x") or 0) + float(closed.get_attribute("width") or 0)
    assert abs(end - float(successor.get_attribute("x") or -1)) < 0.2
    expect(page.get_by_role("table").last).to_contain_text("write")  # the decision log
    screenshot(page, "subject-timeline")
    docs_screenshot(page, "review-timeline")


def test_the_episode_page_shows_its_text_state_and_decisions(
    page: Page, server: Server, keys: Keys
) -> None:
    writer, reader = keys("writer"), keys("reader")
    (episode_id,) = ingest(server, writer, episode_body("my home city is Utrecht"))
    sign_in(page, reader)
    show_subject(page, "mira")
    page.get_by_role("link", name=f"episode {episode_id}").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Episode {episode_id}")
    main = page.locator("main")
    expect(main).to_contain_text("my home city is Utrecht")
    expect(main.locator("dl")).to_contain_text("done")
    expect(main.locator("dl")).to_contain_text("Attempts")
    expect(main.locator("dl")).to_contain_text("rules")  # the extractor
    decisions = page.get_by_role("table")
    expect(decisions).to_contain_text("write")
    expect(decisions).to_contain_text("episode_processed")
    expect(decisions).to_contain_text(writer.split("_")[1])  # the key that sent it
    screenshot(page, "episode")


def test_keyboard_only_sign_in_and_confirm(page: Page, server: Server, keys: Keys) -> None:
    writer, reviewer = keys("writer"), keys("reviewer")
    ingest(server, writer, episode_body("I prefer concise answers.", session_id="chat-1"))
    page.goto("/ui/sign-in")
    page.keyboard.press("Tab")  # the skip link
    page.keyboard.press("Tab")
    expect(page.get_by_label("API key")).to_be_focused()
    page.keyboard.type(reviewer)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Candidates", level=1)).to_be_visible()
    confirm = page.get_by_role("button", name="Confirm")
    for _ in range(30):  # Tab through the page until Confirm has the focus
        page.keyboard.press("Tab")
        if confirm.evaluate("button => document.activeElement === button"):
            break
    expect(confirm).to_be_focused()
    screenshot(page, "keyboard-focus-confirm")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_contain_text("Confirmed: answer_style = concise")


def test_pages_fit_a_390_px_screen(browser: Browser, server: Server, keys: Keys) -> None:
    writer, admin = keys("writer"), keys("admin")
    ingest(server, writer, episode_body("I prefer concise answers.", session_id="chat-1"))
    put_home_cities(server, writer, ("Utrecht", "2026-01-01"), ("Lisbon", "2026-03-01"))
    context = browser.new_context(base_url=server.url, viewport=PHONE)
    try:
        page = context.new_page()
        sign_in(page, admin)
        for name, path in (
            ("candidates", "/ui/candidates"),
            ("quarantine", "/ui/quarantine"),
            ("subject", "/ui/subjects?subject=mira"),
            ("forget", "/ui/subjects/mira/forget"),
        ):
            page.goto(path)
            overflow = page.evaluate("() => document.documentElement.scrollWidth")
            assert overflow <= PHONE["width"], (name, overflow)  # no sideways scrolling
            screenshot(page, f"phone-{name}")
        page.goto("/ui/candidates")
        box = page.get_by_role("button", name="Reject").bounding_box()
        assert box is not None
        assert box["x"] + box["width"] <= PHONE["width"]  # the buttons are on the screen
    finally:
        context.close()


def test_long_lists_paginate(page: Page, server: Server, keys: Keys) -> None:
    writer, reviewer = keys("writer"), keys("reviewer")
    ingest(
        server,
        writer,
        *(
            episode_body("I prefer concise answers.", subject=f"s{n:02}", session_id=f"c{n}")
            for n in range(23)
        ),
    )
    sign_in(page, reviewer)
    cards = page.get_by_role("article")
    expect(cards).to_have_count(20)
    expect(page.get_by_role("link", name="Previous page")).to_have_count(0)
    page.get_by_role("link", name="Next page").click()
    expect(cards).to_have_count(3)
    expect(page.get_by_text("Page 2")).to_be_visible()
    expect(page.get_by_role("link", name="Next page")).to_have_count(0)
    shown = {cards.nth(i).get_by_role("link").first.inner_text() for i in range(3)}
    assert shown == {"s20", "s21", "s22"}  # oldest first: the last three buffered
    screenshot(page, "candidates-page-2")
    page.get_by_role("link", name="Previous page").click()
    expect(cards).to_have_count(20)


def test_the_search_box_finds_what_holds_and_what_was_said(
    page: Page, server: Server, keys: Keys
) -> None:
    writer, reader = keys("writer"), keys("reader")
    put_home_cities(server, writer, ("Utrecht", "2026-01-01"), ("Lisbon", "2026-03-01"))
    ingest(server, writer, episode_body("We moved to Lisbon in March"))
    sign_in(page, reader)
    show_subject(page, "mira")
    page.get_by_label("Search", exact=True).fill("Lisbon Utrecht")
    page.get_by_role("button", name="Search").click()

    found = page.locator("ul.found li")
    expect(found.first).to_contain_text("home_city: Lisbon")
    expect(found.filter(has_text="We moved to Lisbon in March")).to_have_count(1)
    expect(found.filter(has_text="Utrecht")).to_have_count(0)  # superseded: never shown
