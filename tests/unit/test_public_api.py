"""`pipeline.__all__` and the lazy import map stay in step, and every public name resolves."""

from __future__ import annotations

import pipeline
import pipeline.errors


def test_every_public_name_resolves() -> None:
    for name in pipeline.__all__:
        assert getattr(pipeline, name) is not None, name


def test_lazy_names_and_errors_are_all_public() -> None:
    errors = {
        name
        for name, value in vars(pipeline.errors).items()
        if isinstance(value, type) and issubclass(value, pipeline.errors.SgamError)
    }
    assert set(pipeline._LAZY) | errors == set(pipeline.__all__)


def test_every_error_is_in_the_drawn_tree() -> None:
    tree = pipeline.errors.__doc__ or ""
    for name in pipeline.__all__:
        value = getattr(pipeline, name)
        if isinstance(value, type) and issubclass(value, pipeline.errors.SgamError):
            assert name in tree, name
