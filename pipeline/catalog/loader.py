"""Load the memory-schema catalogue from YAML or TOML and report errors with file and line."""

from __future__ import annotations

import tomllib
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from pipeline.errors import CatalogError
from schemas.catalog import Catalog

Location = tuple[str | int, ...]


def default_catalog_text() -> str:
    return (files("schemas") / "default_catalog.yaml").read_text(encoding="utf-8")


def load_catalog(path: Path | None) -> Catalog:
    """The catalogue at `path`, or the bundled default when `path` is None."""
    if path is None:
        return parse_catalog(default_catalog_text(), "<default catalogue>", toml=False)
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(str(path), f"cannot read the catalogue: {exc}") from None
    return parse_catalog(source, str(path), toml=path.suffix.lower() == ".toml")


def parse_catalog(source: str, name: str, *, toml: bool) -> Catalog:
    data, lines = _parse_toml(source, name) if toml else _parse_yaml(source, name)
    try:
        return Catalog.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        loc: Location = tuple(error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        if not loc and ": " in message:  # a whole-catalogue check names its entry itself
            path, message = message.split(": ", 1)
            loc = tuple(path.split("."))
        line = _nearest_line(lines, loc)
        where = f"{name}:{line}" if line else name
        path = ".".join(str(part) for part in loc) or "(top level)"
        raise CatalogError(where, f"{path}: {message}") from None


def _parse_yaml(source: str, name: str) -> tuple[Any, dict[Location, int]]:
    try:
        root = yaml.compose(source, Loader=yaml.SafeLoader)
        data = yaml.safe_load(source)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{name}:{mark.line + 1}" if mark is not None else name
        raise CatalogError(where, f"not valid YAML: {getattr(exc, 'problem', exc)}") from None
    lines: dict[Location, int] = {}
    if root is not None:
        _walk(root, (), lines)
    return data, lines


def _walk(node: yaml.Node, loc: Location, lines: dict[Location, int]) -> None:
    lines[loc] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            child = (*loc, key.value)
            lines[child] = key.start_mark.line + 1
            _walk(value, child, lines)
            lines[child] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*loc, index), lines)


def _parse_toml(source: str, name: str) -> tuple[Any, dict[Location, int]]:
    try:
        data = tomllib.loads(source)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(name, f"not valid TOML: {exc}") from None
    # tomllib keeps no positions: map each table header and key to the line it appears on.
    lines: dict[Location, int] = {}
    table: Location = ()
    for number, raw in enumerate(source.splitlines(), start=1):
        stripped = raw.strip()
        if stripped.startswith("[") and not stripped.startswith("[["):
            table = tuple(part.strip().strip('"') for part in stripped.strip("[]").split("."))
            lines[table] = number
        elif "=" in stripped and not stripped.startswith("#"):
            key = stripped.split("=", 1)[0].strip().strip('"')
            lines[(*table, *key.split("."))] = number
    return data, lines


def _nearest_line(lines: dict[Location, int], loc: Location) -> int | None:
    """The line of the deepest part of `loc` that the file spells out."""
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None
