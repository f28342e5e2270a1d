"""The catalogue loader is bounded and strict: no silent last-wins, no alias expansion, no
unbounded file, no retention that breaks writes; each file is parsed once per process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.catalog import load_catalog, parse_catalog
from pipeline.catalog.loader import MAX_CATALOG_BYTES
from pipeline.errors import CatalogError
from schemas.catalog import MAX_ATTRIBUTES

BASE = """\
version: "v1"
kinds:
  fact: {retention: P3650D}
attributes:
  home_city:
    type: string
"""


def _refused(source: str, name: str = "c.yaml") -> CatalogError:
    with pytest.raises(CatalogError) as refused:
        parse_catalog(source, name, toml=False)
    return refused.value


def test_a_repeated_key_is_refused_with_its_line() -> None:
    source = BASE.replace(
        "kinds:\n  fact: {retention: P3650D}",
        "kinds:\n  fact: {retention: P3650D}\n  fact: {retention: P1D}",
    )
    error = _refused(source)
    assert error.location == "c.yaml:4"
    assert "'fact' is repeated (first on line 3)" in error.problem


def test_a_repeated_key_deeper_down_is_refused_too() -> None:
    error = _refused(BASE + "    type: number\n")
    assert error.location == "c.yaml:7"
    assert "'type' is repeated" in error.problem


def test_an_alias_bomb_is_refused_at_once() -> None:
    laughs = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, 10):
        previous = f"*a{level - 1}"
        laughs.append(f"a{level}: &a{level} [{', '.join([previous] * 9)}]")
    error = _refused("\n".join(laughs) + "\n")
    assert "anchors and aliases are not allowed" in error.problem


def test_a_plain_alias_is_refused() -> None:
    source = BASE.replace(
        "kinds:\n  fact: {retention: P3650D}", "kinds:\n  fact: &r {retention: P3650D}\n  note: *r"
    )
    assert "anchors and aliases" in _refused(source).problem


def test_a_catalogue_larger_than_the_limit_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text(BASE + "# " + "x" * MAX_CATALOG_BYTES + "\n")
    with pytest.raises(CatalogError, match="the limit is 1,048,576"):
        load_catalog(path)


def test_more_attributes_than_the_limit_are_refused() -> None:
    many = "".join(f"  a{n}: {{type: string}}\n" for n in range(MAX_ATTRIBUTES + 1))
    error = _refused(BASE + many)
    assert f"the limit is {MAX_ATTRIBUTES}" in error.problem


@pytest.mark.parametrize(
    ("retention", "problem"),
    [("P3000000D", "at most P36500D"), ("P0D", "longer than zero"), ("PT0S", "longer than zero")],
)
def test_retention_is_bounded(retention: str, problem: str) -> None:
    error = _refused(BASE.replace("P3650D", retention))
    assert error.location == "c.yaml:3"
    assert problem in error.problem


def test_a_promotion_window_is_bounded_too() -> None:
    source = BASE + "    promotion: {times: 2, window: P0D}\n"
    assert "longer than zero" in _refused(source).problem


def test_names_longer_than_their_columns_are_refused() -> None:
    long_kind = "k" * 65
    source = BASE.replace("  fact: {", f"  fact: {{retention: P1D}}\n  {long_kind}: {{")
    assert "1 to 64 characters" in _refused(source).problem
    long_attribute = "a" * 201
    assert (
        "at most 200 characters"
        in _refused(BASE + f"  {long_attribute}: {{type: string}}\n").problem
    )


def test_each_file_is_parsed_once_until_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "catalogue.yaml"
    path.write_text(BASE)
    first = load_catalog(path)
    assert load_catalog(path) is first

    path.write_text(BASE.replace('"v1"', '"v2"'))
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    second = load_catalog(path)
    assert second.version == "v2"
    assert load_catalog(None) is load_catalog(None)
