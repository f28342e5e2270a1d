"""A progress bar on stderr when it is a terminal; in a pipe or a log, nothing."""

from __future__ import annotations

import sys
from typing import Any


class _Quiet:
    def update(self, _: int) -> None:
        pass

    def __enter__(self) -> _Quiet:
        return self

    def __exit__(self, *_: object) -> None:
        pass


def progress(total: int, label: str) -> Any:
    """A context manager whose `update(n)` advances the bar by n of `total` items."""
    if not sys.stderr.isatty():
        return _Quiet()
    import click

    return click.progressbar(length=total, label=label, file=sys.stderr)
