"""The public surface: `pipeline.__all__` is complete and resolvable, the error tree is drawn
in full, and the Python examples of the README and the Python guide use only public names."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import pipeline
from pipeline import errors

ROOT = Path(__file__).parents[2]
# (page, the heading its first Python example follows)
EXAMPLES = [(ROOT / "README.md", "## Python in ten lines"), (ROOT / "docs/guides/python.md", "# ")]


def _error_classes() -> set[str]:
    return {
        name
        for name, value in vars(errors).items()
        if inspect.isclass(value) and issubclass(value, errors.SgamError)
    }


def test_all_names_every_public_name_once() -> None:
    assert len(pipeline.__all__) == len(set(pipeline.__all__))
    assert pipeline.__all__ == sorted(pipeline.__all__, key=lambda name: (name[0].islower(), name))
    lazy = set(pipeline._LAZY)
    # Defined in `pipeline/__init__.py` itself: the store with its after-commit hooks.
    own = {"open_store"}
    assert callable(pipeline.open_store)
    assert set(pipeline.__all__) == _error_classes() | lazy | own


def test_every_public_name_resolves() -> None:
    for name in pipeline.__all__:
        value = getattr(pipeline, name)
        assert value is not None
        assert getattr(value, "__name__", name) == name


def test_the_error_tree_docstring_draws_every_error_class() -> None:
    """Every class is in the tree under one of its bases; a shared mixin (a class several
    branches inherit) is named in the text below the tree."""
    doc = errors.__doc__ or ""
    lines = doc.splitlines()
    drawn = set(re.findall(r"(?:├──|└──|^)\s*([A-Z][A-Za-z]+)", doc, flags=re.MULTILINE))
    mixins = {name for name in _error_classes() - drawn if f"`{name}`" in doc}
    assert _error_classes() - mixins <= drawn, _error_classes() - drawn - mixins
    for name in _error_classes() - {"SgamError"} - mixins:
        index = next(i for i, line in enumerate(lines) if re.search(rf"── {name}\b", line))
        column = lines[index].index(name)
        # The parent is the nearest line above drawn four columns to the left.
        parent_line = next(
            line for line in reversed(lines[:index]) if re.match(r"[A-Z]", line[column - 4 :])
        )
        parent = re.match(r"[A-Za-z]+", parent_line[column - 4 :])
        assert parent is not None
        assert issubclass(getattr(errors, name), getattr(errors, parent.group())), name


@pytest.mark.parametrize(("page", "heading"), EXAMPLES, ids=["readme", "python-guide"])
def test_the_first_python_example_imports_only_the_public_api(page: Path, heading: str) -> None:
    text = page.read_text(encoding="utf-8")
    section = text.split(heading, 1)[1]
    example = section.split("```python", 1)[1].split("```", 1)[0]
    imports = re.findall(r"^(?:from (\S+) import|import (\S+))", example, flags=re.MULTILINE)
    assert imports, "the example imports something"
    assert {module or name for module, name in imports} == {"pipeline"}
    used = set(re.findall(r"\bpipeline\.(\w+)", example))
    assert used
    assert used <= set(pipeline.__all__), used - set(pipeline.__all__)
