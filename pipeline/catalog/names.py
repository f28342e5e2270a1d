"""Naming an attribute the catalogue does not know (the error, with the close matches), and
the catalogue in use when a text matched none of its attributes."""

from __future__ import annotations

import difflib

from pipeline.errors import InvalidInput
from pipeline.settings import Settings
from schemas.catalog import Catalog


def unknown_attribute(catalog: Catalog, name: str) -> InvalidInput:
    close = difflib.get_close_matches(name, list(catalog.attributes), n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else "; declare it there first"
    return InvalidInput("attribute", f"{name!r} is not in catalogue {catalog.version}{hint}")


def active_catalog(settings: Settings) -> str:
    """The catalogue this process reads with, as a newcomer would look it up."""
    if settings.catalog_path is not None:
        return f"{settings.catalog_path} (SGAM_CATALOG_PATH)"
    return f"the bundled {settings.catalog!r} catalogue (SGAM_CATALOG)"


def nothing_matched(settings: Settings) -> str:
    """The note of an answer (remember, an episode) in which nothing was recognised."""
    return (
        f"nothing in the text matched an attribute of {active_catalog(settings)}; "
        "`sgam extract --explain` shows what each clause was tried with"
    )
