"""Load the memory-schema catalogue from YAML or TOML and report errors with file and line.

The loader is bounded: a file larger than MAX_CATALOG_BYTES is refused before it is parsed,
YAML anchors and aliases are refused (an alias bomb would otherwise expand without end), and a
key repeated within one mapping is an error rather than a silent last-wins. Each file is parsed
once per process (with libyaml's C parser where installed) and cached by its size and mtime.
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from pipeline.errors import CatalogError
from schemas.catalog import Catalog

Location = tuple[str | int, ...]
MAX_CATALOG_BYTES = 1024 * 1024
_YAML_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


BUNDLED_CATALOGS = {"personal": "personal_catalog.yaml", "support": "support_catalog.yaml"}
"""The catalogues shipped in `schemas/`, by the name SGAM_CATALOG selects them with."""
DEFAULT_BUNDLED = "personal"


def bundled_catalog_text(name: str = DEFAULT_BUNDLED) -> str:
    file = BUNDLED_CATALOGS.get(name)
    if file is None:
        known = ", ".join(sorted(BUNDLED_CATALOGS))
        raise CatalogError(name, f"no bundled catalogue of that name ({known})")
    return (files("schemas") / file).read_text(encoding="utf-8")


def default_catalog_text() -> str:
    return bundled_catalog_text(DEFAULT_BUNDLED)


def load_catalog(path: Path | None, bundled: str = DEFAULT_BUNDLED) -> Catalog:
    """The catalogue at `path`, or the bundled one named `bundled` when `path` is None."""
    if path is None:
        return bundled_catalog(bundled)
    try:
        status = path.stat()
    except OSError as exc:
        raise CatalogError(str(path), f"cannot read the catalogue: {exc.strerror}") from None
    if status.st_size > MAX_CATALOG_BYTES:
        raise CatalogError(
            str(path),
            f"the catalogue is {status.st_size:,} bytes; the limit is {MAX_CATALOG_BYTES:,}",
        )
    return _load_file(path.resolve(), status.st_size, status.st_mtime_ns)


@cache
def bundled_catalog(name: str = DEFAULT_BUNDLED) -> Catalog:
    """A bundled catalogue by name (`BUNDLED_CATALOGS`), parsed once per process."""
    return parse_catalog(bundled_catalog_text(name), f"<{name} catalogue>", toml=False)


@cache
def _load_file(path: Path, size: int, mtime_ns: int) -> Catalog:
    """Cached per file version: (size, mtime) change when the file is edited."""
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(str(path), f"cannot read the catalogue: {exc}") from None
    return parse_catalog(source, str(path), toml=path.suffix.lower() == ".toml")


def parse_catalog(source: str, name: str, *, toml: bool) -> Catalog:
    if len(source.encode("utf-8")) > MAX_CATALOG_BYTES:
        raise CatalogError(name, f"the catalogue is larger than {MAX_CATALOG_BYTES:,} bytes")
    data, lines = _parse_toml(source, name) if toml else _parse_yaml(source, name)
    try:
        return Catalog.model_validate(data)
    except ValidationError as exc:
        # Of a union's alternatives, report the one that got furthest into the document.
        located = [(_document_path(lines, tuple(error["loc"])), error) for error in exc.errors()]
        loc, error = max(located, key=lambda pair: len(pair[0]) - (pair[0] not in lines))
        message = error["msg"].removeprefix("Value error, ")
        if not loc and ": " in message:  # a whole-catalogue check names its entry itself
            path, message = message.split(": ", 1)
            loc = tuple(path.split("."))
        line = _nearest_line(lines, loc)
        where = f"{name}:{line}" if line else name
        path = ".".join(str(part) for part in loc) or "(top level)"
        raise CatalogError(where, f"{path}: {message}") from None


def _parse_yaml(source: str, name: str) -> tuple[Any, dict[Location, int]]:
    loader = _YAML_LOADER(source)
    try:
        root = loader.get_single_node()
        lines: dict[Location, int] = {}
        if root is not None:
            _walk(root, (), lines, name, set())
        data = loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{name}:{mark.line + 1}" if mark is not None else name
        raise CatalogError(where, f"not valid YAML: {getattr(exc, 'problem', exc)}") from None
    finally:
        loader.dispose()
    return data, lines


def _walk(
    node: yaml.Node, loc: Location, lines: dict[Location, int], name: str, seen: set[int]
) -> None:
    """Record the line of every entry; refuse aliases and repeated keys on the way."""
    if id(node) in seen:  # the composer hands out one node object for an anchor's every alias
        raise CatalogError(
            f"{name}:{node.start_mark.line + 1}", "YAML anchors and aliases are not allowed"
        )
    seen.add(id(node))
    lines[loc] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        first: dict[Any, int] = {}
        for key, value in node.value:
            line = key.start_mark.line + 1
            if key.value in first:
                raise CatalogError(
                    f"{name}:{line}",
                    f"key {key.value!r} is repeated (first on line {first[key.value]})",
                )
            first[key.value] = line
            child = (*loc, key.value)
            _walk(value, child, lines, name, seen)
            lines[child] = line
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*loc, index), lines, name, seen)


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


def _document_path(lines: dict[Location, int], loc: Location) -> Location:
    """`loc` without the parts pydantic adds that the file does not spell (union branches);
    its last part stays, as it names a missing or extra field."""
    spelled = {key[:end] for key in lines for end in range(1, len(key) + 1)}
    path: Location = ()
    for index, part in enumerate(loc):
        if (*path, part) in spelled or index == len(loc) - 1:
            path = (*path, part)
    return path


def _nearest_line(lines: dict[Location, int], loc: Location) -> int | None:
    """The line of the deepest part of `loc` that the file spells out."""
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None
