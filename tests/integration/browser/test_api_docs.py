"""The API's documentation pages in a real browser that may reach no host but the server:
`/docs` (Swagger UI) and `/redoc` (ReDoc) render every operation of the OpenAPI document from
the server's own files, and neither page asks for anything elsewhere."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page, Route, expect

from tests.integration.browser_helpers import screenshot
from tests.integration.server_helpers import Server

pytestmark = [pytest.mark.browser, pytest.mark.postgres]

LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}
METHODS = ("get", "put", "post", "delete", "patch")


@pytest.fixture
def offline(page: Page) -> list[str]:
    """The page with every request to a host other than this machine refused, as on a
    network with no way out; yields the addresses that were refused."""
    refused: list[str] = []

    def only_local(route: Route) -> None:
        address = urlsplit(route.request.url)
        if address.scheme in ("data", "blob") or address.hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort("internetdisconnected")

    page.route("**/*", only_local)
    return refused


def operations(server: Server) -> list[tuple[str, str]]:
    with server.client() as client:
        document = client.get("/openapi.json").json()
    found = [
        (method.upper(), path)
        for path, item in document["paths"].items()
        for method in item
        if method in METHODS
    ]
    assert len(found) > 20, "the OpenAPI document lists the API's operations"
    return found


def no_foreign_address(html: str) -> None:
    addresses = re.findall(r"""(?:https?:)?//[^\s"'<>)]+""", html)
    foreign = [a for a in addresses if urlsplit(a).hostname not in LOCAL_HOSTS]
    assert not foreign, f"the page names addresses elsewhere: {foreign}"


def open_offline_page(page: Page, path: str) -> None:
    """Load a docs page: served, under a policy that allows nothing from elsewhere, and naming
    no address elsewhere."""
    response = page.goto(path)
    assert response is not None
    assert response.status == 200
    assert "default-src 'none'" in response.headers["content-security-policy"]
    no_foreign_address(response.text())


def test_swagger_ui_renders_every_operation_offline(
    page: Page, server: Server, offline: list[str]
) -> None:
    expected = operations(server)
    open_offline_page(page, "/docs")

    blocks = page.locator(".opblock")
    expect(blocks.first).to_be_visible(timeout=20_000)
    expect(blocks).to_have_count(len(expected))
    shown = {
        (
            block.locator(".opblock-summary-method").inner_text().strip().upper(),
            block.locator(".opblock-summary-path").get_attribute("data-path"),
        )
        for block in blocks.all()
    }
    assert shown == set(expected)
    expect(page.get_by_role("heading", name=re.compile(r"^SGAM"))).to_be_visible()
    screenshot(page, "api-docs-swagger")
    assert offline == [], f"the page asked for addresses elsewhere: {offline}"


def test_redoc_renders_every_operation_offline(
    page: Page, server: Server, offline: list[str]
) -> None:
    expected = operations(server)
    open_offline_page(page, "/redoc")

    # ReDoc draws one section per operation, its id naming the operation.
    sections = page.locator("[data-section-id^='operation/']")
    expect(sections.first).to_be_attached(timeout=20_000)
    expect(sections).to_have_count(len(expected))
    paths = page.locator("[data-section-id^='operation/']").evaluate_all(
        "sections => sections.map(s => s.innerText)"
    )
    for method, path in expected:
        assert any(method.lower() in text.lower() and path in text for text in paths), (
            f"{method} {path} is not on the ReDoc page"
        )
    screenshot(page, "api-docs-redoc")
    assert offline == [], f"the page asked for addresses elsewhere: {offline}"
