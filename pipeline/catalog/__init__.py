"""The memory-schema catalogue: loading it (`loader`) and naming what it lacks (`names`).
Checking stored facts against it reads the ledger, so it lives with the reads
(`pipeline/read/catalog_check.py`)."""

from pipeline.catalog.loader import default_catalog_text, load_catalog, parse_catalog

__all__ = ["default_catalog_text", "load_catalog", "parse_catalog"]
