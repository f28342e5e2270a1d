"""The benchmark's stub OpenAI-compatible server (bench/stub_llm.py) as a test fixture: served
from a thread of the test process on a free port, reachable by worker processes too."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

_PATH = Path(__file__).resolve().parents[2] / "bench" / "stub_llm.py"


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("stub_llm", _PATH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("stub_llm", module)
    spec.loader.exec_module(module)
    return module


stub_llm = _load()
StubServer = stub_llm.StubServer
EMBEDDING_DIMENSIONS = stub_llm.EMBEDDING_DIMENSIONS
