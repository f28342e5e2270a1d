"""Naming an attribute the catalogue does not know: the error, with the close matches."""

from __future__ import annotations

import difflib

from pipeline.errors import InvalidInput
from schemas.catalog import Catalog


def unknown_attribute(catalog: Catalog, name: str) -> InvalidInput:
    close = difflib.get_close_matches(name, list(catalog.attributes), n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else "; declare it there first"
    return InvalidInput("attribute", f"{name!r} is not in catalogue {catalog.version}{hint}")
