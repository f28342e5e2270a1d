"""The memory-schema catalogue: loading it (`loader`) and checking stored facts against it
(`check`)."""

from pipeline.catalog.loader import (
    BUNDLED_CATALOGS,
    bundled_catalog,
    bundled_catalog_text,
    default_catalog_text,
    load_catalog,
    parse_catalog,
)

__all__ = [
    "BUNDLED_CATALOGS",
    "bundled_catalog",
    "bundled_catalog_text",
    "default_catalog_text",
    "load_catalog",
    "parse_catalog",
]
