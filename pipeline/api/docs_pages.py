"""The API's documentation pages, `/docs` (Swagger UI) and `/redoc` (ReDoc), served whole by
this server: FastAPI's own pages load their scripts from a CDN and stay blank offline.

The scripts and styles come from the `fastapi-offline` package, which ships Swagger UI's and
ReDoc's bundles as files; this module serves them under `/docs/assets` and writes the two
pages around them, with no address outside this server (no web fonts, no favicon from
elsewhere, and no call to Swagger's online validator). ReDoc's bundle still names its maker's
logo on a CDN; the pages' Content-Security-Policy keeps the browser from asking for it, or for
anything else outside this server.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/docs/assets"
ASSETS = Path(str(files("fastapi_offline") / "static"))
# Swagger UI asks validator.swagger.io to judge the document unless told not to.
SWAGGER_PARAMETERS = {"validatorUrl": None}
# Both pages start their bundle from an inline script and style themselves inline; ReDoc's
# search runs in a worker made from a blob.
POLICY = (
    "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)


def _local(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = POLICY
    return page


def mount(app: FastAPI) -> None:
    """Serve `/docs`, its OAuth2 redirect page, `/redoc` and their assets on `app`, which
    must be built with `docs_url=None, redoc_url=None` (FastAPI's pages use a CDN)."""
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS), name="docs-assets")
    redirect = "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        page = get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} — Swagger UI",
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            oauth2_redirect_url=f"{root}{redirect}",
            swagger_ui_parameters=SWAGGER_PARAMETERS,
        )
        return _local(page)

    @app.get(redirect, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return _local(get_swagger_ui_oauth2_redirect_html())

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        page = get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} — ReDoc",
            redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )
        return _local(page)
