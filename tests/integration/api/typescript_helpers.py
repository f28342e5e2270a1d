"""The TypeScript client's package (clients/typescript) under test: installed with `npm ci`
when its lock file changed, built, and its npm scripts run with the servers' addresses in the
environment."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "clients" / "typescript"
INSTALLED = PACKAGE / "node_modules" / ".package-lock.json"  # npm ci writes it last


def npm() -> str:
    found = shutil.which("npm")
    if found is None:  # the client's tests are part of the suite: a machine without Node fails
        raise AssertionError("npm is not installed: the TypeScript client needs Node >= 20")
    return found


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    """Run a command in the package; its output, or an AssertionError that shows it."""
    done = subprocess.run(
        args,
        cwd=PACKAGE,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(args)} exited with {done.returncode}\n{output[-6000:]}"
    return output


def installed_and_built() -> None:
    """`npm ci` unless node_modules was installed from this very lock file; the build unless
    dist/ is newer than every source (`make test` has just built it)."""
    lock = PACKAGE / "package-lock.json"
    if not INSTALLED.exists() or INSTALLED.stat().st_mtime < lock.stat().st_mtime:
        run(npm(), "ci", "--no-audit", "--no-fund")
    built = PACKAGE / "dist" / "index.js"
    sources = [*(PACKAGE / "src").glob("*.ts"), PACKAGE / "tsconfig.json", INSTALLED]
    if not built.exists() or built.stat().st_mtime < max(p.stat().st_mtime for p in sources):
        run(npm(), "run", "build")
