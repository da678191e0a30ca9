"""Fixtures for collector tests: the stand-in NVML library (see tests/nvml_stub/fixture.py)."""

import sys
from pathlib import Path

from nvml_stub.fixture import nvml_stub, nvml_stub_library  # noqa: F401

# pytest puts tests/ on sys.path (no __init__.py files), so tests/collectors/sources would
# otherwise shadow the package collectors.sources as a namespace package. A regular package
# anywhere on sys.path wins over namespace folders, so the repository root is enough.
_REPO = str(Path(__file__).resolve().parents[2])
if _REPO not in sys.path:
    sys.path.append(_REPO)
