"""The memory-schema catalogue: loading it (`loader`) and checking stored facts against it
(`check`)."""

from pipeline.catalog.loader import default_catalog_text, load_catalog, parse_catalog

__all__ = ["default_catalog_text", "load_catalog", "parse_catalog"]
