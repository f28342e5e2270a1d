"""The memory-schema catalogue: loading it (`loader`) and naming what it lacks (`names`).
Checking stored facts against it reads the ledger, so it lives with the reads
(`pipeline/read/catalog_check.py`)."""

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
