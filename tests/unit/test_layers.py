"""No import runs uphill: every module imports only its own unit and the layers below it.

The layers, lowest first (a unit is a top-level package, a subpackage of `pipeline`, or a
top-level module of `pipeline`; units on one line are independent of each other):

 0. schemas, prompts        the records, payloads, enums and prompt templates: no pipeline
 1. pipeline.errors         the exception tree
 2. pipeline.validation, pipeline.settings, pipeline.logs (how every process logs)
 3. pipeline.catalog, pipeline.observe   loading the memory-schema catalogue; traces
 4. pipeline.db             tables, backends, the store and its unit of work, its hooks
 5. pipeline.embedding      the search read's optional vectors: endpoint, storage, spend, and
                            their making after a commit (the store's after-commit hook)
 6. pipeline.ledger         the bi-temporal write path and the decision log
 7. pipeline.read, pipeline.access, pipeline.extract
 8. pipeline.buffer         the recurrence buffer (writes through the ledger)
 9. pipeline.policy         what to do with a candidate (write, quarantine, buffer)
10. pipeline.episodes       intake, processing, states, driving
11. pipeline.hot_path, pipeline.consolidation, pipeline.rebuild (replay of the whole log)
12. pipeline.demo
13. pipeline                the public Python API (`pipeline/__init__.py`)
14. pipeline.api            the HTTP service's routes, operations, access and problems
15. pipeline.ui, pipeline.mcp   the review UI and the MCP server, over the API's operations
16. pipeline.api.app, pipeline.cli   the composition roots: the HTTP app (mounts the API's
                            routers, the UI and MCP) and the command line
17. workers                 the Celery tasks

The rule is checked on the source with `ast`, imports inside functions and under
TYPE_CHECKING included: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PACKAGES = ("schemas", "prompts", "pipeline", "workers")
LAYERS: list[tuple[str, ...]] = [
    ("schemas", "prompts"),
    ("pipeline.errors",),
    ("pipeline.validation", "pipeline.settings", "pipeline.logs"),
    ("pipeline.catalog", "pipeline.observe"),
    ("pipeline.db",),
    ("pipeline.embedding",),
    ("pipeline.ledger",),
    ("pipeline.read", "pipeline.access", "pipeline.extract"),
    ("pipeline.buffer",),
    ("pipeline.policy",),
    ("pipeline.episodes",),
    ("pipeline.hot_path", "pipeline.consolidation", "pipeline.rebuild"),
    ("pipeline.demo",),
    ("pipeline",),
    ("pipeline.api",),
    ("pipeline.ui", "pipeline.mcp"),
    ("pipeline.api.app", "pipeline.cli"),
    ("workers",),
]
# Modules that are a unit of their own, apart from their package.
OWN_UNITS = {"pipeline.api.app"}
LEVEL = {unit: level for level, units in enumerate(LAYERS) for unit in units}


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def unit_of(module: str) -> str:
    """`pipeline.ledger.write` → `pipeline.ledger`; `pipeline` itself is the public API."""
    parts = module.split(".")
    if ".".join(parts[:3]) in OWN_UNITS:
        return ".".join(parts[:3])
    if parts[0] != "pipeline" or len(parts) == 1:
        return parts[0]
    return ".".join(parts[:2])


def imported(module: str, source: str, *, package: bool = False) -> set[str]:
    """The project modules `module` imports (`from pipeline import cli` names pipeline.cli)."""
    anchor = module if package else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = anchor.split(".")[: len(anchor.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                names.add(submodule if submodule in MODULES else base)
    return {name for name in names if name.split(".")[0] in PACKAGES}


def uphill(module: str, targets: set[str]) -> list[str]:
    mine = unit_of(module)
    return [
        f"{module} imports {target} ({unit_of(target)} is not below {mine})"
        for target in sorted(targets)
        if unit_of(target) != mine and LEVEL[unit_of(target)] >= LEVEL[mine]
    ]


def test_every_unit_has_a_layer() -> None:
    units = {unit_of(module) for module in MODULES}
    assert units - set(LEVEL) == set(), "add the new unit to LAYERS (and to the docstring)"
    assert set(LEVEL) - units == set(), "a unit in LAYERS no longer exists"


def test_no_module_imports_a_higher_or_sibling_layer() -> None:
    found = []
    for module, path in sorted(MODULES.items()):
        source = path.read_text(encoding="utf-8")
        found += uphill(module, imported(module, source, package=path.name == "__init__.py"))
    assert found == []


def test_the_check_sees_uphill_and_lazy_imports() -> None:
    """The rule itself can fail: what the ledger's replay registry used to import is refused,
    inside a function too; the package's own modules and lower layers pass."""
    source = (
        "from pipeline.db.unit import Unit\n"
        "from . import events\n"
        "def late() -> None:\n"
        "    from pipeline import consolidation\n"
        "    from pipeline.buffer import candidates\n"
    )
    targets = imported("pipeline.ledger.write", source)
    assert targets == {
        "pipeline.db.unit",
        "pipeline.ledger.events",
        "pipeline.consolidation",
        "pipeline.buffer.candidates",
    }
    assert [line.split(" (")[0] for line in uphill("pipeline.ledger.write", targets)] == [
        "pipeline.ledger.write imports pipeline.buffer.candidates",
        "pipeline.ledger.write imports pipeline.consolidation",
    ]
    assert uphill("schemas.facts", {"pipeline.errors"}) != []


def _test_imports(source: str) -> set[str]:
    """The modules of `tests` that `source` imports, as dotted names."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in names if name.split(".")[0] == "tests"}


def _borrowed(names: set[str]) -> list[str]:
    return sorted(
        name for name in names if name.rpartition(".")[2].startswith("test_") or "conftest" in name
    )


def test_no_test_module_imports_another_test_module_or_conftest() -> None:
    """Shared helpers live in tests/factories.py, tests/databases.py or a `*_helpers` module:
    importing a test module runs (and may collect) its tests twice."""
    found = {
        str(path.relative_to(ROOT)): borrowed
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if (borrowed := _borrowed(_test_imports(path.read_text(encoding="utf-8"))))
    }
    assert found == {}
    probe = "from tests.conftest import FrozenClock\nfrom tests.integration import test_forget\n"
    assert _borrowed(_test_imports(probe)) == [
        "tests.conftest",
        "tests.conftest.FrozenClock",
        "tests.integration.test_forget",
    ]


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of a graph, each once, as the modules on it from its smallest."""
    found: set[tuple[str, ...]] = set()

    def walk(path: list[str]) -> None:
        for target in sorted(edges.get(path[-1], ())):
            if target == path[0]:
                found.add(tuple(path))
            elif target not in path and target > path[0]:
                walk([*path, target])

    for start in sorted(edges):
        walk([start])
    return [list(cycle) for cycle in sorted(found)]


def _package_edges() -> dict[str, set[str]]:
    """Each module's imports of its sibling modules (the package's `__init__` aside),
    TYPE_CHECKING and lazy imports included."""
    edges: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        if path.name == "__init__.py":
            continue
        package = module.rpartition(".")[0]
        targets = imported(module, path.read_text(encoding="utf-8"))
        edges[module] = {
            target
            for target in targets
            if target != module
            and target.rpartition(".")[0] == package
            and MODULES.get(target, Path()).name != "__init__.py"
        }
    return edges


def test_no_import_cycle_among_a_packages_modules() -> None:
    """Types that several modules of a package share live in a module below all of them."""
    assert _cycles(_package_edges()) == []


def test_the_cycle_check_sees_a_circle_under_type_checking() -> None:
    """What `episodes/process.py`, `inflight.py` and `traces.py` used to do is refused."""
    process = "from pipeline.episodes.inflight import run_in_flight\n"
    inflight = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from pipeline.episodes.process import Claimed\n"
    )
    edges = {
        "pipeline.episodes.process": imported("pipeline.episodes.process", process),
        "pipeline.episodes.inflight": imported("pipeline.episodes.inflight", inflight),
    }
    assert _cycles(edges) == [["pipeline.episodes.inflight", "pipeline.episodes.process"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


# The largest a module may grow; migrations are generated history and stay as written.
MAX_LINES = 400
SIZED = (*PACKAGES, "bench", "scripts")


def _line_counts() -> dict[str, int]:
    counts = {}
    for top in SIZED:
        for path in (ROOT / top).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            counts[str(path.relative_to(ROOT))] = len(path.read_text(encoding="utf-8").splitlines())
    return counts


def test_no_module_is_over_400_lines() -> None:
    counts = _line_counts()
    assert counts["pipeline/hot_path.py"] <= 200
    over = {path: lines for path, lines in counts.items() if lines > MAX_LINES}
    assert over == {}, over


@pytest.mark.parametrize("module", ["hot_path", "consolidation"])
def test_the_lanes_use_the_episode_stage_only_through_its_seam(module: str) -> None:
    """`pipeline/hot_path.py` and `pipeline/consolidation.py` use the episode stage only
    through its seam (`stage.py`), and no `_name` of any other module."""
    tree = ast.parse((ROOT / "pipeline" / f"{module}.py").read_text(encoding="utf-8"))
    froms = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    private = [alias.name for node in froms for alias in node.names if alias.name.startswith("_")]
    episodes = {
        node.module for node in froms if (node.module or "").startswith("pipeline.episodes")
    }
    assert private == []
    assert episodes == {"pipeline.episodes.stage"}
