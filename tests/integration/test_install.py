"""Installing the project prints no warning of the build backend: a new user's `make demo`
showed setuptools' licence deprecation twice."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).parents[2]

pytestmark = pytest.mark.slow


def test_building_the_package_prints_no_build_warning(tmp_path: Path) -> None:
    """The same backend run pip makes for `pip install`, in an isolated build environment
    with the setuptools pyproject.toml asks for."""
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(tmp_path), "."],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    printed = built.stdout + built.stderr
    assert built.returncode == 0, printed[-4000:]
    assert list(tmp_path.glob("sgam-*.whl")), printed[-4000:]
    for warning in ("BuildBackendWarning", "SetuptoolsDeprecationWarning", "project.license"):
        assert warning not in printed, printed[-4000:]
